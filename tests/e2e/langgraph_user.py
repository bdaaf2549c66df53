"""A stand-in for a user's langgraph agent (verl's recipe subclasses ``ReactAgentLoop``): a small real
StateGraph, no tools and no network. The model answers, a reviewer node asks it to check its answer, the
model answers again."""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langgraph.graph import END, MessagesState, StateGraph

from siirl.agent_loop.langgraph import ReactAgentLoop, call_model

#: What the reviewer says after the first answer.
REVIEW = "Check it."


def review(state: MessagesState) -> dict[str, list]:
    return {"messages": [HumanMessage(content=REVIEW)]}


def after_answer(state: MessagesState) -> str:
    return "review" if sum(1 for m in state["messages"] if m.type == "ai") < 2 else END


class ReviewedAgentLoop(ReactAgentLoop):
    @classmethod
    def build_graph(cls):
        graph = StateGraph(MessagesState)
        graph.add_node("agent", call_model)
        graph.add_node("review", review)
        graph.set_entry_point("agent")
        graph.add_conditional_edges("agent", after_answer, {"review": "review", END: END})
        graph.add_edge("review", "agent")
        return graph.compile()
