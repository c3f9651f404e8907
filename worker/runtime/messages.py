"""Messages a worker cannot read, and chunk messages it can never do: each is logged on one line,
counted in ``fanyi_messages_dropped_total{reason}`` and dropped; the worker goes on taking chunks.

Nothing but the producer should put messages on the queues, but a queue is an open Redis list: a
``redis-cli lpush translate.cpu:5 garbage``, a half-written or hand-edited message, an old client
with another serializer. What such a message holds is never logged (it may be anything, secrets
included): its queue and what is wrong with it.

Three depths, three reasons:

* ``undecodable``: the raw payload is not a kombu message (not JSON, a JSON value that is not
  kombu's envelope, a base64 body that is corrupt). kombu's Redis transport decodes it in the
  worker's event loop, before Celery sees a message: ``Channel._brpop_read`` pops the payload and
  calls ``loads()``, and ``basic_consume``'s callback builds the ``Message`` (base64-decoding the
  body). Whatever they raise leaves the event loop, Celery calls it an "Unrecoverable error" and the
  main process exits, its chunk unacknowledged until the visibility timeout. No setting of kombu or
  Celery reaches there, and Celery's consumer hooks (``on_decode_error`` and the others) only see
  what became a ``Message``. So the hook is a subclass of that ``Channel`` (``Channel``, with its
  ``Transport``) that the ``redis`` and ``rediss`` schemes resolve to (``use_transport``, called by
  ``worker.runtime.app``; the URL, TLS and every transport option stay kombu's). It catches only what the
  payload raised before it became a ``Message``, and only decoding errors: a broker that fails is
  still the connection's error, and what fails in Celery's handling of a message is not caught
  here. The payload was popped by ``BRPOP`` and was never in the unacknowledged set, so
  dropping it is forgetting it: it is not kept (a dead-letter list of arbitrary payloads would keep
  whatever secret one carried, in a Redis every worker reads).
* ``not_a_task``: a kombu message that Celery cannot take as a task (its body is not JSON, its
  content type is refused, as pickle is, it has no task name or names a task no worker has, its
  headers or body are not a task's). Celery's consumer has hooks for these (``on_decode_error``,
  ``on_unknown_message``, ``on_unknown_task``, ``on_invalid_task``) that drop the message, but its
  strategy reads a task message's headers and body unchecked: a body that is not ``[args, kwargs,
  embed]`` stopped the worker, a task message without an id made the consumer reconnect (and put
  the message back: for ever). ``Consumer`` (the ``worker_consumer`` setting) checks the message
  before Celery's handler (``task_message_problem``) and makes the four hooks log one line without
  the body and count.
* ``invalid_chunk``: a ``translate_chunk`` message whose arguments no worker can ever do
  (``chunk_arguments``, before anything is read or written, and ``InvalidChunk`` once the manifest
  says how many chunks the job has): acknowledged, not retried, and nothing is written to storage,
  so a stray chunk number cannot plant a part in a job's folder.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from celery import signals
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.exceptions import ContentDisallowed
from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis
from kombu.transport.virtual.base import Message as VirtualMessage
from vine import promise

from contract.messages import short
from worker.monitoring import fleet, metrics

log = logging.getLogger(__name__)

# What decoding a raw payload raises: JSONDecodeError, UnicodeDecodeError and binascii.Error are
# ValueErrors; a JSON value of another shape raises KeyError, TypeError or AttributeError.
DECODING_ERRORS = (ValueError, KeyError, TypeError, AttributeError)


def dropped(reason: str, what: str, queue: str = "") -> None:
    """One log line and one count for a message dropped unread or undone."""
    metrics.MESSAGES_DROPPED.labels(reason=reason).inc()
    log.error("dropped a message%s (%s): %s", f" from {queue}" if queue else "", reason, short(what, 300))


class Message(VirtualMessage):
    """kombu's message; once built, the payload is a message and its errors are no longer its payload's."""

    def __init__(self, payload: Any, channel: Any = None, **kwargs: Any) -> None:
        if not isinstance(payload, Mapping) or not isinstance(payload.get("properties"), Mapping):
            raise TypeError(f"a JSON {type(payload).__name__}, not a message envelope with properties")
        if not isinstance(payload.get("headers") or {}, Mapping):
            raise TypeError("its headers are not an object")
        info = payload["properties"].get("delivery_info")
        if not isinstance(info, Mapping) or not {"exchange", "routing_key"} <= info.keys():
            raise KeyError("delivery_info")  # kombu needs it to put the message back
        super().__init__(payload, channel=channel, **kwargs)
        if channel is not None:
            channel.unread = False


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, except that a payload that cannot be decoded is dropped (see the module)."""

    Message = Message
    unread = False  # a payload was popped and is not yet a Message

    def _brpop_read(self, **options: Any) -> Any:
        self.unread = True
        try:
            return super()._brpop_read(**options)
        except DECODING_ERRORS as err:
            if not self.unread:
                raise  # the message was built: what failed is not its payload
            dropped("undecodable", f"{type(err).__name__}: {err}", ", ".join(self._active_queues))
            return True
        finally:
            self.unread = False


class Transport(kombu_redis.Transport):
    Channel = Channel


def use_transport() -> None:
    """Make ``redis://`` and ``rediss://`` broker URLs resolve to ``Transport`` in this process."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"


class Consumer(CeleryConsumer):
    """Celery's consumer, its four hooks for messages that are not tasks logging one line each and
    counting; they drop the message as Celery does (``on_decode_error`` acknowledges it, the others
    reject it without requeue). Before Celery's handler a message must be a task message as Celery 5
    sends them (``task_message_problem``): Celery turns only some malformed ones into
    ``on_invalid_task``, and the KeyError or ValueError of others stops the consumer (a reconnection
    that puts the message back, so for ever) or the worker."""

    def connect(self) -> Any:
        """Each connection to the broker, the first and every one after a lost one: the messages received
        on an earlier one are no longer this worker's to acknowledge (``worker.monitoring.fleet.connected``)."""
        connection = super().connect()
        fleet.connected(self.hostname)
        return connection

    def create_task_handler(self, promise: Any = promise) -> Any:
        handle = super().create_task_handler(promise)

        def on_task_received(message: Any) -> Any:
            problem = task_message_problem(message)
            if problem is not None:
                return self.on_invalid_task(None, message, InvalidTaskMessage(problem))
            return handle(message)

        return on_task_received

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        dropped("not_a_task", f"its body cannot be decoded ({type(exc).__name__}: {exc})", _queue(message))
        message.ack()

    def on_unknown_message(self, body: Any, message: Any) -> None:
        dropped("not_a_task", "it is not a task message", _queue(message))
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=None)

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        name = (message.headers or {}).get("task") or (body.get("task") if isinstance(body, Mapping) else None)
        dropped("not_a_task", f"no task {short(repr(name), 80)} here", _queue(message))
        message.reject_log_error(log, self.connection_errors)

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        dropped("not_a_task", f"{type(exc).__name__}: {exc}", _queue(message))
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=exc)


class InvalidTaskMessage(Exception):
    """A kombu message that is not a task message Celery 5 could have sent."""


def task_message_problem(message: Any) -> str | None:
    """Why ``message`` is not a task message (protocol 2) as Celery's strategy reads it, None if it is:
    headers with a task name and id and well-formed time limits, a body that decodes (in a content
    type this worker accepts) to ``[args, kwargs, embed]``. The body is decoded here, in the main
    process, once: a chunk message's is a few hundred bytes."""
    headers = message.headers
    if not isinstance(headers.get("task"), str) or not isinstance(headers.get("id"), str):
        return "it is not a task message: no task name and id in its headers"
    limits = headers.get("timelimit")
    if limits and not (
        isinstance(limits, list | tuple) and len(limits) == 2 and all(_number_or_none(x) for x in limits)
    ):
        return "its time limits are not two numbers"
    if not _number_or_none(headers.get("retries")):
        return "its retries are not a number"
    try:
        body = message.decode()
    except ContentDisallowed as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - a serializer raises what it raises
        return f"its body cannot be decoded ({type(err).__name__}: {err})"
    if not (
        isinstance(body, list | tuple) and len(body) == 3 and isinstance(body[0], list | tuple)
        and isinstance(body[1], Mapping) and isinstance(body[2] or {}, Mapping)
    ):  # fmt: skip
        return "its body is not [args, kwargs, embed]"
    return None


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _queue(message: Any) -> str:
    return str((message.delivery_info or {}).get("routing_key") or "")
