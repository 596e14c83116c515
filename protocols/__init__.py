"""Elastic training protocols, written once against :mod:`protocols.api`."""
