"""Explanations: attention, context mixing, attributions and the numbers that say how far to trust them.

Attention maps, the context-mixing measures, the attribution engine (Integrated Gradients) and the other
methods, ERASER faithfulness, documents of any length in windows, exports (HTML, JSON, figures) and a whole
table explained at once; a tagger's entities and word-pieces explained (``entity_attribution``: Integrated Gradients
of an entity's summed label log-probabilities, occlusion per entity). Imports train/ (for reading tables), models/
and the shared kernel only.
"""
