"""Node kinds, one module per family: the node classes, their spec, their builders (a mixin of
:class:`~cudagraph.Graph`) and their checks.

Import node classes from :mod:`cudagraph.definition.nodes`, the aggregate.
"""
