"""Hypothesis strategies shared by the pure tests."""

from __future__ import annotations

from hypothesis import strategies as st

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
