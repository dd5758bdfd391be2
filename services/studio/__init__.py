"""The studio's device side (issue 24): the PB1 line protocol of a card-reading shoe and a
simulated shoe serving it over TCP (docs/studio.md). Standard library and the rules only.
"""
