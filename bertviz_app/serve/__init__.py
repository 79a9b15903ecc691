"""Serving: one FastAPI app with the typed JSON API (``/v1``) and the web page mounted on it.

``server.py`` (routes, the one error handler, gates, start-up and shutdown), ``api_schema.py`` (pydantic
requests and responses), the start-up page that answers before torch is imported, and the allocator's tuning.
The only package that imports FastAPI, Starlette or uvicorn.
"""
