"""The structured pipeline's stages and what they share.

The models are imported first: garden.models reads its settings, labels and reasons off
the stage list (garden/rerank/stages.py) once its own classes are defined, so whichever
module of this package is imported first, the models finish before the stages load.
"""
import garden.models  # noqa: F401
