"""A metric's success condition: a small grammar, parsed by hand and never evaluated as code.

    condition  := conjunction ("or" conjunction)*
    conjunction := comparison ("and" comparison)*
    comparison := "outcome" ("==" | "!=") STRING
                | "action_count" ("==" | "!=" | "<" | "<=" | ">" | ">=") INTEGER

A string is quoted with ' or "; an outcome is success, failure or dead_end. ``and``
binds tighter than ``or``. Anything else is an ``InvalidCondition`` naming the token
and where it is. An empty condition holds for every sequence.
"""

import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from raymem.errors import InvalidRequest
from raymem.types_procedural import ActionSequence

OUTCOMES = ("success", "failure", "dead_end")
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
FIELDS = ("outcome", "action_count")

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'[^']*'|"[^"]*")
      | (?P<integer>\d+)
      | (?P<operator>==|!=|<=|>=|<|>)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)


class InvalidCondition(InvalidRequest):
    code = "invalid_condition"

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem

    def __str__(self) -> str:
        return f"Invalid success_condition: {self.problem}"


class Token(NamedTuple):
    kind: str  # string, integer, operator, word, end
    text: str
    position: int  # 1-based character where it starts


class Comparison(NamedTuple):
    field: str
    compare: str
    value: str | int

    def holds(self, sequence: ActionSequence) -> bool:
        return COMPARISONS[self.compare](getattr(sequence, self.field), self.value)


class Condition(NamedTuple):
    """Alternatives (``or``) of conjunctions (``and``) of comparisons."""

    alternatives: tuple[tuple[Comparison, ...], ...]

    def holds(self, sequence: ActionSequence) -> bool:
        if not self.alternatives:
            return True
        return any(all(c.holds(sequence) for c in conj) for conj in self.alternatives)


def tokenize(text: str) -> list[Token]:
    """The tokens of a condition, then an end token.

    Raises:
        InvalidCondition: a character that starts no token.
    """
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            start = len(text) - len(text[position:].lstrip())
            if text[start] in "'\"":
                raise InvalidCondition(f"unterminated string at character {start + 1}")
            raise InvalidCondition(f"unexpected {text[start]!r} at character {start + 1}")
        tokens.append(
            Token(match.lastgroup, match.group(match.lastgroup), match.start(match.lastgroup) + 1)
        )
        position = match.end()
    tokens.append(Token("end", "", len(text) + 1))
    return tokens


class _Parser:
    def __init__(self, tokens: Sequence[Token]) -> None:
        self.tokens, self.index = tokens, 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def condition(self) -> Condition:
        alternatives = [self.conjunction()]
        while self.peek().kind == "word" and self.peek().text == "or":
            self.take()
            alternatives.append(self.conjunction())
        token = self.peek()
        if token.kind != "end":
            raise InvalidCondition(
                f"expected 'and', 'or' or the end, found {token.text!r} at character {token.position}"
            )
        return Condition(tuple(alternatives))

    def conjunction(self) -> tuple[Comparison, ...]:
        comparisons = [self.comparison()]
        while self.peek().kind == "word" and self.peek().text == "and":
            self.take()
            comparisons.append(self.comparison())
        return tuple(comparisons)

    def comparison(self) -> Comparison:
        name = self.take()
        if name.kind == "end":
            raise InvalidCondition("a comparison is missing at the end")
        if name.kind != "word" or name.text not in FIELDS:
            raise InvalidCondition(
                f"expected outcome or action_count, found {name.text!r} at character"
                f" {name.position}"
            )
        compare = self.take()
        if compare.kind != "operator":
            found = repr(compare.text) if compare.kind != "end" else "the end"
            raise InvalidCondition(f"expected a comparison after {name.text!r}, found {found}")
        value = self.take()
        if name.text == "outcome":
            return self._outcome(compare, value)
        return self._count(compare, value)

    @staticmethod
    def _outcome(compare: Token, value: Token) -> Comparison:
        if compare.text not in ("==", "!="):
            raise InvalidCondition(
                f"outcome compares with == or != only, not {compare.text!r}"
                f" (character {compare.position})"
            )
        if value.kind != "string":
            found = repr(value.text) if value.kind != "end" else "the end"
            raise InvalidCondition(f"outcome compares with a quoted outcome, found {found}")
        outcome = value.text[1:-1]
        if outcome not in OUTCOMES:
            raise InvalidCondition(
                f"{outcome!r} is not an outcome (success, failure or dead_end)"
                f" at character {value.position}"
            )
        return Comparison("outcome", compare.text, outcome)

    @staticmethod
    def _count(compare: Token, value: Token) -> Comparison:
        if value.kind != "integer":
            found = repr(value.text) if value.kind != "end" else "the end"
            raise InvalidCondition(f"action_count compares with a whole number, found {found}")
        return Comparison("action_count", compare.text, int(value.text))


def parse(text: str) -> Condition:
    """The condition ``text`` states (an empty text holds for every sequence).

    Raises:
        InvalidCondition: the text is not in the grammar; the message names the token.
    """
    if not text.strip():
        return Condition(())
    return _Parser(tokenize(text)).condition()
