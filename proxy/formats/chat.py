"""OpenAI chat messages -> Trajectory, by the script rules of docs/formats.md.

- system/developer and tool messages are not turns (tool outputs are kept as reference data);
- the first user message is the task; later user messages attach to the turn they precede,
  or trail after the last turn;
- each assistant message with text or tool calls is one turn with all its calls;
- a text-only one ends a round; user messages after it are the follow-up that opens the next
  round (the harness sends those itself), and an assistant or tool message that comes after it
  with no user message between is dropped;
- an assistant message without tool calls before the first user message (and before any turn)
  is part of the prompt, like the system prompt: the environment put it there (a greeting);
  assistant steps before a user message that come after a turn, or with tool calls, are turns, and
  the task is the first user message only if no turn came before it;
- an assistant message right after a text-only turn is dropped, unless the file records it as a
  model call of its own (it carries `generation_token_ids`, as NeMo-Gym's training rollouts do for
  each call): then it is the next turn, whose prompt (an observation, a user line) was not recorded;
- an empty assistant message that is the last answer is replayed as it was recorded; one with
  more answers after it is skipped (requests are read without empty messages: served mid-script,
  it would be due again), and so is one before the task;
- a tool message without a tool_call_id answers the earliest call of the turn before it that had
  no recorded id (so a file that records no ids at all still pairs calls and outputs);
- skipped and dropped messages are reported;
- with no tool call at all the script is text-based (proxy.replay.text_based): the user messages
  between turns are the harness's observations, and it is one round.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.apis.responses_history import OWN_CALL
from proxy.errors import LoadError
from proxy.formats.answer import assistant_text, epoch, tool_calls, usage_of
from proxy.replay.content import text_of
from proxy.replay.tokens import BadTokens, Tokens, read_tokens
from proxy.replay.trajectory import Note, Trajectory, Turn, UserMessage, place_of
from proxy.replay.usage import OutOfRange


def trajectory_from_messages(
    messages: Sequence[Any],
    *,
    name: str,
    filename: str,
    fmt: str,
    digest: str,
    indexes: Sequence[int] | None = None,
    places: Mapping[int, str] | None = None,
    unit: str = "message",
) -> Trajectory:
    """Build the script. `indexes` maps each message to its position in the file, when the
    messages were converted from another shape (errors and notes must point into the file);
    `places` and `unit` say how to name a position (Trajectory.place)."""
    # until the task or a turn, no user message has come: "before the task" needs one to follow
    has_user = any(type(m) is dict and m.get("role") == "user" for m in messages)
    reading = _Reading(filename, fmt, digest, places, unit, has_user)
    read = reading.read
    # a 10 MB trajectory has tens of thousands of messages: the loop is kept lean on purpose
    for pos, msg in enumerate(messages):
        read(indexes[pos] if indexes is not None else pos, msg)
    return reading.trajectory(name, len(messages))


class _Reading:
    """The script as it is read, one message at a time: what the skip rules carry from one
    message to the next."""

    __slots__ = (
        "digest", "dropped", "empty", "filename", "final_index", "fmt", "follow_up", "greetings",
        "has_user", "outputs", "pending", "places", "provisional", "round", "skipped", "systems",
        "task", "turns", "unanswered", "unit",
    )  # fmt: skip

    def __init__(
        self,
        filename: str,
        fmt: str,
        digest: str,
        places: Mapping[int, str] | None,
        unit: str,
        has_user: bool,
    ) -> None:
        self.filename, self.fmt, self.digest = filename, fmt, digest
        self.places, self.unit, self.has_user = places, unit, has_user
        self.task: str | None = None
        self.systems: list[str] = []  # joined once as the API parsers join them (conv.system)
        self.greetings: list[str] = []  # assistant text before the task: prompt
        self.empty: tuple[int, str | None, Tokens | None] | None = None  # until what follows
        self.provisional = False  # the last turn is an empty answer: stands if no answer follows
        self.unanswered: deque[str] = deque()  # ids made up for the last turn's calls
        self.turns: list[Turn] = []
        self.pending: list[UserMessage] = []
        self.outputs: dict[str, str] = {}
        self.skipped: list[Note] = []
        self.dropped: list[Note] = []
        self.final_index: int | None = None  # the text-only turn that ended the round
        self.follow_up: list[UserMessage] = []  # the user messages after it
        self.round = 1

    def read(self, idx: int, msg: Any) -> None:
        """One message: checked, then what its role makes of it."""
        if type(msg) is not dict:
            raise LoadError(self.filename, idx, "message is not a JSON object")
        role = msg.get("role")
        if type(role) is not str:
            raise LoadError(self.filename, idx, "message has no role")
        content = msg.get("content")
        if content is not None and type(content) is not str and type(content) is not list:
            raise LoadError(
                self.filename, idx, "content must be a string, a list of parts, or null"
            )
        if self.empty is not None and role in ("assistant", "user"):
            self._settle_empty(role)
        ahead = self.final_index is not None and role in ("assistant", "tool")
        if ahead and not self._opens_next(idx, role, msg):
            return
        if role in ("system", "developer"):
            if self.task is None and not self.turns:  # the prompt ends at the task or a turn
                self.systems.append(text_of(content))
        elif role == "tool":
            self._tool(idx, msg, content)
        elif role == "user":
            self._user(idx, content)
        elif role == "assistant":
            self._assistant(idx, msg, content)
        else:
            self.skipped.append(Note(idx, f"unknown role {role!r}"))

    def _settle_empty(self, role: str) -> None:
        """An empty answer before an answer is skipped; before a user message, it ended its
        round, unless more answers come."""
        assert self.empty is not None
        if role == "assistant" or self.provisional:
            self.skipped.append(_placeholder(self.empty))
        else:
            self.final_index = _empty_answer(
                self.turns, self.empty, self.pending, self.follow_up, self.round
            )
            self.pending, self.follow_up, self.provisional = [], [], True
            self.unanswered.clear()
        self.empty = None

    def _opens_next(self, idx: int, role: str, msg: dict[str, Any]) -> bool:
        """After a text-only turn: an assistant or tool message opens the next round once a
        follow-up came (or it is a model call of its own); else it is dropped (False)."""
        if not self.follow_up and role == "assistant" and OWN_CALL in msg:
            self.follow_up = []  # a model call of its own: what it was sent was not recorded
        elif not self.follow_up:
            assert self.final_index is not None
            where = place_of(self.final_index, self.places, self.unit)
            self.dropped.append(
                Note(
                    idx,
                    f"{role} message right after the text-only turn ({where}) "
                    "with no user message between",
                )
            )
            return False
        self.final_index = None
        self.round += 1
        return True

    def _tool(self, idx: int, msg: dict[str, Any], content: Any) -> None:
        call_id = msg.get("tool_call_id")
        if type(call_id) is not str and self.unanswered:
            call_id = self.unanswered.popleft()
        if type(call_id) is str:
            self.outputs[call_id] = content if type(content) is str else text_of(content)
        else:
            self.skipped.append(Note(idx, "tool message without a tool_call_id"))

    def _user(self, idx: int, content: Any) -> None:
        if self.task is None and not self.turns:
            self.task = text_of(content)
        elif self.final_index is not None:
            self.follow_up.append(UserMessage(idx, content if content is not None else ""))
        else:
            self.pending.append(UserMessage(idx, content if content is not None else ""))

    def _assistant(self, idx: int, msg: dict[str, Any], content: Any) -> None:
        filename = self.filename
        reasoning, text = assistant_text(msg, content)
        try:
            tokens = read_tokens(msg)
        except BadTokens as exc:
            if self.fmt != "recording":
                raise LoadError(filename, idx, str(exc)) from None
            # an upstream's answer, recorded as it came: its run is still a run
            self.skipped.append(Note(idx, f"its token fields are not kept: {exc}"))
            tokens = None
        calling = bool(msg.get("tool_calls")) or isinstance(msg.get("function_call"), dict)
        before_task = self.task is None and not self.turns and self.has_user
        if not calling and not text.strip():
            if before_task:
                self.skipped.append(Note(idx, "empty assistant message before the task"))
            else:
                self.empty = (idx, reasoning, tokens)
            return
        if self.provisional:  # an answer follows the empty one: a harness never sends it back
            self.pending, self.follow_up, self.round = _withdrawn(
                self.turns, self.pending, self.follow_up, self.skipped
            )
            self.provisional = False
        number = len(self.turns) + 1
        calls, made_up = tool_calls(msg, filename, idx, self.digest, number)
        if not calls and before_task:
            self.greetings.append(text)  # before the task: prompt, compared like the system's
            return
        self.unanswered = deque(made_up)
        try:
            created = epoch(msg.get("created"))
            usage = usage_of(msg.get("usage"))
        except OutOfRange as exc:
            raise LoadError(filename, idx, str(exc)) from None
        self.turns.append(
            Turn(
                number,
                idx,
                text,
                reasoning,
                calls,
                tuple(self.pending),
                None,
                self.round,
                tuple(self.follow_up),
                usage,
                created,
                tokens,
            )
        )
        self.pending, self.follow_up = [], []
        if not calls:
            self.final_index = idx

    def trajectory(self, name: str, read: int) -> Trajectory:
        """The script once every message is read: a last empty answer as it was recorded, and
        what is left at the end said."""
        turns, skipped = self.turns, self.skipped
        if self.empty is not None and not self.provisional:  # the last answer was empty
            _empty_answer(turns, self.empty, self.pending, self.follow_up, self.round)
            self.pending, self.follow_up = [], []
        elif self.empty is not None:
            skipped.append(_placeholder(self.empty))
        text_based = bool(turns) and not any(t.tool_calls for t in turns)
        if text_based:  # the user messages between turns are observations: one round
            for turn in turns:
                turn.round = 1
        what = (
            "the observation of the last turn"
            if text_based
            else "a follow-up after the last answer"
        )
        for user in self.follow_up:
            skipped.append(
                Note(
                    user.index,
                    f"{what}, with no recorded answer: the harness sends its own, and it goes live",
                )
            )
        systems, greetings = self.systems, self.greetings
        return Trajectory(
            name=name,
            filename=self.filename,
            format=self.fmt,
            digest=self.digest,
            task=self.task,
            system="\n".join([*systems, *greetings]) if systems or greetings else None,
            turns=tuple(turns),
            trailing_users=tuple(self.pending),
            tool_outputs=self.outputs,
            skipped=tuple(skipped),
            dropped=tuple(self.dropped),
            places=self.places or {},
            unit=self.unit,
            read=read,
        )


def _placeholder(empty: tuple[int, str | None, Tokens | None]) -> Note:
    only = " (reasoning only)" if empty[1] else ""
    return Note(empty[0], f"empty assistant message{only}, followed by another answer")


def _withdrawn(
    turns: list[Turn], pending: list[UserMessage], follow_up: list[UserMessage], skipped: list[Note]
) -> tuple[list[UserMessage], list[UserMessage], int]:
    """Take back an empty answer that more answers follow. The request parsers pass over empty
    assistant messages, so served mid-script it would be due again on every request; it is skipped,
    and the user messages after it come before the next turn, as if it had never been read."""
    empty = turns.pop()
    skipped.append(
        Note(
            empty.index,
            "empty assistant message, followed by more of the run: only a last answer is "
            "replayed empty",
        )
    )
    return [*empty.users_before, *follow_up, *pending], list(empty.follow_up), empty.round


def _empty_answer(
    turns: list[Turn],
    empty: tuple[int, str | None, Tokens | None],
    pending: list[UserMessage],
    follow_up: list[UserMessage],
    in_round: int,
) -> int:
    """An empty answer that nothing replaced: a final turn with no text, as the model gave it."""
    idx, reasoning, tokens = empty
    turns.append(
        Turn(
            len(turns) + 1,
            idx,
            "",
            reasoning,
            (),
            tuple(pending),
            None,
            in_round,
            tuple(follow_up),
            tokens=tokens,
        )
    )
    return idx
