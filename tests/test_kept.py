"""A kept property is worked out on its first read only, then read from the object, frozen dataclasses included."""

from __future__ import annotations

import dataclasses

from vllm_hpu_mm.kept import kept_property


@dataclasses.dataclass(frozen=True)
class Counted:
    a: float
    b: float
    reads: list[int] = dataclasses.field(default_factory=list, compare=False)

    @kept_property
    def total(self) -> float:
        """The sum, counted each time it is worked out."""
        self.reads.append(1)
        return self.a + self.b


def test_a_kept_property_is_worked_out_once_per_object_even_when_frozen() -> None:
    one, two = Counted(1.0, 2.0), Counted(1.0, 2.0)
    assert [one.total, one.total, two.total] == [3.0, 3.0, 3.0]
    assert (len(one.reads), len(two.reads)) == (1, 1)
    assert one == two  # kept values are not fields


def test_a_kept_property_read_on_the_class_is_the_descriptor_with_its_doc() -> None:
    assert isinstance(Counted.total, kept_property)
    assert Counted.total.__doc__ == "The sum, counted each time it is worked out."
