"""The fault vocabulary and the world it applies to: data only, no runtime code."""
