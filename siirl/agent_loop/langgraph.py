"""verl's langgraph recipe (``recipe.langgraph_agent``) on siiRL: a ReAct agent as a langgraph graph whose
model node is a langchain chat model over the rollout's generation server. Needs ``pip install 'siirl[agents]'``
(langgraph); a loop file naming a class of this module without it is refused before Ray in one line.

Tokens in, tokens out: the chat model keeps the trajectory's token ids and response mask on each AI message
it returns (``response_metadata``), appends the rendering of the tool or user messages that followed (mask
0) and the policy's new tokens (mask 1), so the trained tokens are exactly those the policy sampled, however
the graph passes its messages around. A user's loop subclasses :class:`ReactAgentLoop` and sets its
langchain tools in ``init_class``, or overrides ``build_graph`` for a graph of its own, as in verl.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any, ClassVar, Literal

import langgraph  # noqa: F401 - first: without the agents extra, the refusal names langgraph
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.messages.tool import InvalidToolCall, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from siirl.agent_loop.base import AgentLoopBase, AgentLoopOutput
from siirl.agent_loop.observation import ObservationRenderer
from siirl.agent_loop.tool_parser import TOOL_PARSERS

logger = logging.getLogger(__name__)

_TOOL_CALL_TEXT = re.compile(r"<tool_call>.*?(</tool_call>|$)", re.DOTALL)


class MaxTokenExceededError(Exception):
    """The trajectory's response (policy and inserted tokens) would pass the response length."""


class ChatModel(BaseChatModel):
    """A langchain chat model answering through the agent loop's ``server_manager``."""

    client: Any
    tokenizer: Any
    #: The trajectory's response budget (``rollout.response_length``).
    max_tokens: int
    #: ``multi_turn.format``: how tool calls are read from the policy's text.
    tool_parser: str = "hermes"
    max_parallel_calls: int = 1
    #: ``multi_turn.tokenization_sanity_check_mode``, for rendering the messages that follow an AI turn.
    sanity_check: str = "strict"

    @property
    def _llm_type(self) -> str:
        return "siirl-rollout"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any):
        raise NotImplementedError("the rollout's generation server is asynchronous: invoke the graph with ainvoke")

    def _encode(self, messages: list[dict], tools: Any) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _context(self, messages: list[BaseMessage], tools: Any) -> tuple[list[int], list[int]]:
        """The token ids to continue and the response mask so far."""
        last_ai = max((i for i, m in enumerate(messages) if m.type == "ai"), default=None)
        if last_ai is None:
            return self._encode(convert_to_openai_messages(messages), tools), []
        meta = messages[last_ai].response_metadata
        ids, mask = list(meta["prompt_ids"]), list(meta["response_mask"])
        added = convert_to_openai_messages(messages[last_ai + 1 :])
        inserted = ObservationRenderer(self.tokenizer, self.sanity_check)(added) if added else []
        if len(mask) + len(inserted) >= self.max_tokens:
            raise MaxTokenExceededError(f"response length {self.max_tokens} reached")
        return ids + inserted, mask + [0] * len(inserted)

    def _message(self, ids: list[int], mask: list[int], new: list[int]) -> AIMessage:
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        calls, invalid = [], []
        for call in TOOL_PARSERS.get(self.tool_parser)(text)[: self.max_parallel_calls]:
            if call.error:
                invalid.append(InvalidToolCall(name=call.name or None, args=None, id=str(uuid.uuid4()), error=call.error))
            else:
                calls.append(ToolCall(name=call.name, args=call.arguments, id=str(uuid.uuid4())))
        return AIMessage(
            content=_TOOL_CALL_TEXT.sub("", text).strip(), tool_calls=calls, invalid_tool_calls=invalid,
            response_metadata={"prompt_ids": ids + new, "response_mask": mask + [1] * len(new)},
        )

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        ids, mask = self._context(messages, kwargs.get("tools"))
        output = await self.client.generate(prompt_ids=ids, sampling_params=kwargs.get("sampling_params") or {})
        message = self._message(ids, mask, list(output.token_ids))
        return ChatResult(generations=[ChatGeneration(message=message)])


def convert_to_agent_output(messages: list[BaseMessage], response_length: int) -> AgentLoopOutput:
    """The trajectory held by the last AI message (tool messages after it were never seen by the policy)."""
    last_ai = max((i for i, m in enumerate(messages) if m.type == "ai"), default=None)
    if last_ai is None:
        raise ValueError("the graph ended without a model turn")
    ids = messages[last_ai].response_metadata["prompt_ids"]
    mask = messages[last_ai].response_metadata["response_mask"]
    kinds = [m.type for m in messages if m.type != "system"]
    turns = sum(1 for i, kind in enumerate(kinds) if i == 0 or kind != kinds[i - 1])  # parallel calls: one turn
    split = len(ids) - len(mask)
    return AgentLoopOutput(prompt_ids=ids[:split], response_ids=ids[split:][:response_length],
                           response_mask=mask[:response_length], num_turns=turns)


async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, list]:
    model = config["configurable"]["model"]
    try:
        message = await model.ainvoke(state["messages"], sampling_params=config["configurable"]["sampling_params"])
    except MaxTokenExceededError:
        return {"messages": []}
    return {"messages": [message]}


def should_continue(state: MessagesState, config: RunnableConfig) -> Literal["tools", "__end__"]:
    """To the tools while the last AI turn calls one and the turn budget lasts."""
    last = state["messages"][-1]
    turns = sum(1 for m in state["messages"] if m.type == "ai")
    if last.type != "ai" or not last.tool_calls or turns >= config["configurable"]["max_assistant_turns"]:
        return END
    return "tools"


class ReactAgentLoop(AgentLoopBase):
    """verl's ``ReactAgentLoop``: model -> tools -> model ... until a turn calls no tool."""

    #: The langchain tools the graph's ToolNode runs (a subclass sets them in ``init_class``, as in verl).
    tools: ClassVar[list] = []
    graph: Any = None
    #: Graph steps allowed per assistant turn (a model and a tools node), with room to spare.
    NODES_PER_TURN = 3

    @classmethod
    def init_class(cls, config: Any, tokenizer: Any, processor: Any = None, **kwargs: Any) -> None:
        if cls._class_initialized:
            return
        cls._class_initialized = True
        cls.graph = cls.build_graph()

    @classmethod
    def build_graph(cls) -> Any:
        workflow = StateGraph(MessagesState)
        workflow.add_node("agent", call_model)
        workflow.add_node("tools", ToolNode(cls.tools))
        workflow.set_entry_point("agent")
        workflow.add_conditional_edges("agent", should_continue, {"tools": "tools", END: END})
        workflow.add_edge("tools", "agent")
        return workflow.compile()

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        rollout = self.rollout_config
        multi_turn = rollout.multi_turn
        model = ChatModel(
            client=self.server_manager, tokenizer=self.tokenizer, max_tokens=int(rollout.response_length),
            tool_parser=str(multi_turn.format), max_parallel_calls=int(multi_turn.max_parallel_calls),
            sanity_check=str(multi_turn.tokenization_sanity_check_mode),
        ).bind_tools(self.tools)
        turns = int(multi_turn.max_assistant_turns or multi_turn.max_turns)
        config = {
            "configurable": {"model": model, "sampling_params": sampling_params, "max_assistant_turns": turns},
            "recursion_limit": max(25, self.NODES_PER_TURN * turns),
        }
        state = await self.graph.ainvoke({"messages": list(kwargs["raw_prompt"])}, config=config)
        return convert_to_agent_output(state["messages"], int(rollout.response_length))
