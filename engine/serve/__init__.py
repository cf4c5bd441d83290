"""`blockyard serve`: HTTP API, live events, hot reload, web page, schedules (docs/serve.md).

Import `engine.serve.app.create_app` for the ASGI app; this package imports nothing heavy.
"""
