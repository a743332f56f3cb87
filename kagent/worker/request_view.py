"""The view every page of the API and the dashboard is: while it handles a request, the worker's long work
runs in short slices.

A client waits on each step of a request (the worker reads it, asks the other workers, merges their
answers, writes the response), and each step, once ready, waits for the slice of long work the event loop
is running (:mod:`kagent.worker.loop_slices`). While a request is under way those slices are short
(:func:`~kagent.worker.loop_slices.request_under_way`), so its steps follow each other; the long work pays
a few more yields for the milliseconds a request takes. ``/metrics`` is not such a view: a scrape is long
work of its own, in slices.
"""

from __future__ import annotations

from typing import Any

from faust.web import View

from kagent.worker.loop_slices import request_under_way

__all__ = ["RequestView"]


class RequestView(View):
    """A Faust view whose requests run with the worker's long work in short slices."""

    async def dispatch(self, request: Any) -> Any:
        with request_under_way():
            return await super().dispatch(request)
