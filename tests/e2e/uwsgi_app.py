"""The WSGI application of e2e_agent_python_uwsgi: each request burns about
20 ms of CPU in pure Python (burn, under handle), so the agent's samples of
a worker serving it should carry these frames."""


def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def handle(environ):
    return burn(60000)


def application(environ, start_response):
    body = b"%d\n" % handle(environ)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
