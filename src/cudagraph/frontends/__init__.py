"""Layer 5: interop adapters, the demo and the command line.

- :mod:`~cudagraph.frontends.launch`: ``cudagraph.launch`` / ``memcpy`` / ``memset`` / ``host`` /
  ``record`` / ``wait`` / ``fork`` / ``join``, whose target is a stream, a stream under capture or a Path.
"""
