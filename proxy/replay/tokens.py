"""Token ids and log-probabilities a model call recorded: kept with its turn, served as recorded.

RL frameworks train on what the policy produced, so a replayed turn carries the token fields its
recording held, in the fields the recording used, and nothing is made up for a turn that recorded
none. Three families of fields, all read from (and written to) a chat-form assistant message:

- NeMo-Gym's (its training rollouts, on the item that ends a model call, and its Chat Completions
  message): `prompt_token_ids`, `generation_token_ids`, `generation_log_probs`, and the opaque
  `routed_experts`. NeMo-Gym writes all three; a file that records fewer (another trainer's
  harness: no prompt ids) keeps what it has. `generation_token_ids` alone and empty is the chat
  loader's mark of a model call of its own, not tokens.
- vLLM's (`return_token_ids`): the answer's `prompt_token_ids` and its choice's `token_ids`.
- OpenAI's `logprobs` (Chat Completions' `choices[].logprobs.content`, Responses' `output_text`
  `logprobs`): entries of {token, logprob, bytes, top_logprobs}, kept whole.

The lists are kept as they were read, never copied: a late turn's prompt is 100k ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROMPT = "prompt_token_ids"
GENERATION = "generation_token_ids"
LOG_PROBS = "generation_log_probs"
EXPERTS = "routed_experts"
VLLM_GENERATION = "token_ids"
LOGPROBS = "logprobs"
NEMO_GYM_FIELDS = (PROMPT, GENERATION, LOG_PROBS)
# the body field a token-in server continues a conversation from (--handoff-tokens): NeMo-Gym's
# model servers and NeMo RL's vLLM server read it
PREFIX_FIELD = "required_prefix_token_ids"
# every field of a chat-form message that holds tokens (kept out of text comparisons)
FIELDS = frozenset({*NEMO_GYM_FIELDS, EXPERTS, VLLM_GENERATION, LOGPROBS})


# what a client may send back in its history of the fields the proxy served: taken out of a live
# request's history for an upstream that is not token-in (Trajectory.tokens_upstream)
ECHOED = (PROMPT, GENERATION, LOG_PROBS, EXPERTS, VLLM_GENERATION)


# where LiteLLM keeps a message's fields it does not know, and sends them back (mini-swe-agent)
LITELLM_EXTRA = "provider_specific_fields"


def without_tokens(history: list[Any]) -> list[Any] | None:
    """The history with the token fields taken off its entries (a chat message, a Responses
    item, and LiteLLM's provider_specific_fields of a message); None when no entry has any: the
    body then goes as it came."""
    out: list[Any] | None = None
    for k, entry in enumerate(history):
        if isinstance(entry, dict) and (kept := _untokened(entry)) is not None:
            if out is None:
                out = list(history)
            out[k] = kept
    return out


def _untokened(entry: dict[str, Any]) -> dict[str, Any] | None:
    extra = entry.get(LITELLM_EXTRA)
    nested = isinstance(extra, dict) and any(f in extra for f in ECHOED)
    if not nested and not any(f in entry for f in ECHOED):
        return None
    kept = {key: v for key, v in entry.items() if key not in ECHOED}
    if nested and isinstance(extra, dict):
        rest = {key: v for key, v in extra.items() if key not in ECHOED}
        if rest:
            kept[LITELLM_EXTRA] = rest
        else:  # there for the token fields alone
            del kept[LITELLM_EXTRA]
    return kept


class BadTokens(ValueError):
    """Token fields that cannot be what a model call recorded; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Tokens:
    """One model call's recorded tokens. `style` says whose fields the recording used:
    "nemo-gym", "vllm", or "openai" (log-probability entries only)."""

    style: str
    prompt: list[int] | None = None
    generation: list[int] | None = None
    log_probs: list[float] | None = None
    entries: list[Any] | None = None  # OpenAI logprob entries, as recorded
    routed_experts: Any = None

    def generation_log_probs(self) -> list[Any] | None:
        """The per-token log-probabilities: as recorded, else from the OpenAI entries."""
        if self.log_probs is not None:
            return self.log_probs
        if self.entries is None:
            return None
        derived = [e.get("logprob") if isinstance(e, dict) else None for e in self.entries]
        if self.generation is not None and len(derived) != len(self.generation):
            return None  # not one per generated id: none, rather than a list that misleads
        if any(type(p) not in (int, float) for p in derived):
            return None
        return derived

    def nemo_gym(self) -> dict[str, Any]:
        """NeMo-Gym's fields, for an item or message that has no other place for them (a
        Responses output item, a rollout export): the ones this call recorded."""
        out: dict[str, Any] = {}
        if self.prompt is not None:
            out[PROMPT] = self.prompt
        if self.generation is not None:
            out[GENERATION] = self.generation
        if (log_probs := self.generation_log_probs()) is not None and self.generation is not None:
            out[LOG_PROBS] = log_probs
        if self.routed_experts is not None:
            out[EXPERTS] = self.routed_experts
        return out

    def message_fields(self) -> dict[str, Any]:
        """The fields on a chat-form assistant message (a Chat Completions answer's message, a
        recording's, `convert`'s), in the recording's own family."""
        if self.style == "nemo-gym":
            out = self.nemo_gym()
            if self.entries is not None:
                out[LOGPROBS] = {"content": self.entries}
            return out
        out = {}
        if self.style == "vllm":
            if self.prompt is not None:
                out[PROMPT] = self.prompt
            out[VLLM_GENERATION] = self.generation
        if self.entries is not None:
            out[LOGPROBS] = {"content": self.entries}
        return out

    def prefix(self) -> list[int] | None:
        """Every token the policy saw and wrote up to the end of this call: its prompt, then its
        generation (what a token-in server continues from); None without both."""
        if self.prompt is None or self.generation is None:
            return None
        whole = [*self.prompt, *self.generation]
        # a prompt is checked at both ends when read: what goes upstream is checked whole
        return whole if all(type(v) is int for v in whole) else None


def read_tokens(message: dict[str, Any]) -> Tokens | None:
    """The tokens a chat-form assistant message carries; None when it carries none. BadTokens
    for fields that are there but cannot be a call's tokens (NeMo-Gym's own rules)."""
    entries = _entries(message.get(LOGPROBS))
    # the mark of a model call of its own (formats/chat.py), beside vLLM's fields or alone
    marked = (
        message.get(GENERATION) == []
        and LOG_PROBS not in message
        and (PROMPT not in message or VLLM_GENERATION in message)
    )
    if (GENERATION in message or LOG_PROBS in message) and not marked:
        if GENERATION not in message:
            raise BadTokens("generation_log_probs without generation_token_ids")
        generation = _ids(message, GENERATION)
        prompt = _prompt(message) if PROMPT in message else None
        log_probs = _floats(message, LOG_PROBS) if LOG_PROBS in message else None
        if log_probs is not None and len(generation) != len(log_probs):
            raise BadTokens(
                f"generation_token_ids has {len(generation)} ids but generation_log_probs has "
                f"{len(log_probs)} values: one log-probability per generated token"
            )
        return Tokens("nemo-gym", prompt, generation, log_probs, entries, message.get(EXPERTS))
    if VLLM_GENERATION in message and message[VLLM_GENERATION] is not None:
        asked = _prompt(message) if message.get(PROMPT) is not None else None
        return Tokens("vllm", asked, _ids(message, VLLM_GENERATION), None, entries)
    if entries is not None:
        return Tokens("openai", entries=entries)
    return None


# what an element must be: its types, what the list is said to be, and what one element is
_Kind = tuple[tuple[type, ...], str, str]
_ID: _Kind = ((int,), "a list of token ids", "a token id (an integer)")
_NUMBER: _Kind = ((int, float), "a list of numbers", "a number")


def _ids(message: dict[str, Any], name: str) -> list[int]:
    return _checked(message, name, _ID)


def _prompt(message: dict[str, Any]) -> list[int]:
    """The prompt's ids, checked at both ends only: a rollout's prompts grow with every call (a
    100-call run holds millions of ids), so checking each would cost more than reading the file.
    The generated ids, which a trainer learns from, are checked one by one."""
    return _checked(message, PROMPT, _ID, ends_only=True)


def _floats(message: dict[str, Any], name: str) -> list[float]:
    return _checked(message, name, _NUMBER)


def _checked(
    message: dict[str, Any],
    name: str,
    kind: _Kind,
    *,
    ends_only: bool = False,
) -> list[Any]:
    """The list under `name`, each element (or its two ends) of the kind's types; else
    BadTokens naming the first that is not."""
    types, whole, one = kind
    value = message.get(name)
    if not isinstance(value, list):
        raise BadTokens(f"{name} must be {whole}, not {type(value).__name__}")
    places = sorted({0, len(value) - 1}) if ends_only and value else range(len(value))
    for k in places:
        if type(value[k]) not in types:
            raise BadTokens(f"{name}[{k}] must be {one}, not {value[k]!r:.40}")
    return value


def _entries(logprobs: Any) -> list[Any] | None:
    """OpenAI logprob entries: Chat's {"content": [...]}, or a Responses part's bare list."""
    if isinstance(logprobs, dict):
        logprobs = logprobs.get("content")
    if isinstance(logprobs, list) and logprobs:
        return logprobs
    return None
