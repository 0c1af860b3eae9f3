"""The structured pipeline's stages and what they share: the query context, the eligibility rules, one
module per stage, and the stage list (`stages.py`) with what is read off it."""
