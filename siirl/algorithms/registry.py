"""The registry every algorithm family uses, under the name the algorithm modules import it by
(the implementation is :mod:`siirl.registry`)."""

from siirl.registry import Registry

__all__ = ["Registry"]
