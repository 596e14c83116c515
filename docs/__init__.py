"""The documentation, shipped as package data of ``elastic_sim.docs`` (Markdown files:
architecture.md, writing-a-protocol.md, trace-events.md). A package only so that the
installed name maps onto this folder; it holds no code."""
