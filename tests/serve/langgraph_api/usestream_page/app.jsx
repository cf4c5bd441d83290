// A chat page on the real `useStream` hook of @langchain/langgraph-sdk/react, as a LangGraph chat UI is written
// (test_usestream_page.py bundles it with esbuild and drives it in headless chromium against `blockyard serve`).
//
//     index.html?api=<server>/lg&assistant=<flow>[&thread=<thread id>][&token=<API key>]
//
// Everything a test reads carries a `data-testid`; the page checks nothing itself.
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const query = new URLSearchParams(window.location.search);
const apiUrl = query.get("api");
const assistantId = query.get("assistant");
const token = query.get("token");

// a message's content as text: a string, or its text content blocks joined
function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((block) => (typeof block === "string" ? block : block?.text ?? "")).join("");
  }
  return JSON.stringify(content ?? null);
}

function json(value) {
  return JSON.stringify(value ?? null, null, 2);
}

function errorText(error) {
  if (error == null) return "";
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  if (typeof error === "string") return error;
  return json(error);
}

// the options agent-chat-ui (langchain-ai/agent-chat-ui) sends with its edit and regenerate
const AS_AGENT_CHAT_UI = { streamMode: ["values"], streamSubgraphs: true, streamResumable: true };

function BranchSwitcher({ stream, meta }) {
  const options = meta?.branchOptions ?? [];
  if (options.length <= 1) return null;
  const index = options.indexOf(meta.branch);
  return (
    <span data-testid="branch-switcher">
      <button
        data-testid="branch-prev"
        disabled={index <= 0}
        onClick={() => stream.setBranch(options[index - 1])}
      >
        prev
      </button>
      <span data-testid="branch-index">
        {index + 1} / {options.length}
      </span>
      <button
        data-testid="branch-next"
        disabled={index >= options.length - 1}
        onClick={() => stream.setBranch(options[index + 1])}
      >
        next
      </button>
    </span>
  );
}

function Message({ stream, message, index }) {
  const [edited, setEdited] = useState(textOf(message.content));
  const meta = stream.getMessagesMetadata(message, index);
  const parent = meta?.firstSeenState?.parent_checkpoint ?? null;
  return (
    <li data-testid="message" data-type={message.type} data-id={message.id ?? ""}>
      <span data-testid="message-type">{message.type}</span>:{" "}
      <span data-testid="message-text">{textOf(message.content)}</span>
      {message.type === "human" && (
        <span data-testid="edit">
          <input
            data-testid="edit-text"
            value={edited}
            onChange={(event) => setEdited(event.target.value)}
          />
          <button
            data-testid="edit-send"
            disabled={stream.isLoading}
            onClick={() =>
              stream.submit(
                { messages: [{ type: "human", content: edited }] },
                { checkpoint: parent, ...AS_AGENT_CHAT_UI },
              )
            }
          >
            edit
          </button>
        </span>
      )}
      {message.type === "ai" && (
        <button
          data-testid="regenerate"
          disabled={stream.isLoading}
          onClick={() => stream.submit(undefined, { checkpoint: parent, ...AS_AGENT_CHAT_UI })}
        >
          regenerate
        </button>
      )}
      <BranchSwitcher stream={stream} meta={meta} />
    </li>
  );
}

// One action request of a LangChain human-in-the-loop interrupt, with the decisions its review config allows:
// each sends `{decisions: [decision]}` as the resume value of a command.
function ActionRequest({ stream, request, config }) {
  const [args, setArgs] = useState(json(request.args ?? {}));
  const [reason, setReason] = useState("");
  const allowed = config?.allowed_decisions ?? [];
  const decide = (decision) =>
    stream.submit(undefined, { command: { resume: { decisions: [decision] } } });
  return (
    <li data-testid="action-request" data-name={request.name}>
      <span data-testid="action-name">{request.name}</span>
      <span data-testid="action-description">{request.description ?? ""}</span>
      <pre data-testid="action-args">{json(request.args)}</pre>
      <span data-testid="allowed-decisions">{allowed.join(",")}</span>
      {allowed.includes("approve") && (
        <button data-testid="approve" onClick={() => decide({ type: "approve" })}>
          approve
        </button>
      )}
      {allowed.includes("edit") && (
        <span>
          <textarea
            data-testid="edit-args"
            value={args}
            onChange={(event) => setArgs(event.target.value)}
          />
          <button
            data-testid="edit-decision"
            onClick={() =>
              decide({
                type: "edit",
                edited_action: { name: request.name, args: JSON.parse(args) },
              })
            }
          >
            edit
          </button>
        </span>
      )}
      {allowed.includes("reject") && (
        <span>
          <input
            data-testid="reject-message"
            value={reason}
            onChange={(event) => setReason(event.target.value)}
          />
          <button
            data-testid="reject"
            onClick={() => decide({ type: "reject", message: reason })}
          >
            reject
          </button>
        </span>
      )}
    </li>
  );
}

function Interrupt({ stream }) {
  const interrupts = stream.interrupts;
  if (interrupts.length === 0) return <div data-testid="interrupt" data-present="false" />;
  return (
    <div data-testid="interrupt" data-present="true">
      {interrupts.map((interrupt, i) => {
        const value = interrupt.value ?? {};
        const configs = value.review_configs ?? [];
        return (
          <div key={interrupt.id ?? i} data-testid="interrupt-item" data-id={interrupt.id ?? ""}>
            <pre data-testid="interrupt-value">{json(interrupt.value)}</pre>
            <ul>
              {(value.action_requests ?? []).map((request, j) => (
                <ActionRequest
                  key={`${interrupt.id}-${j}`}
                  stream={stream}
                  request={request}
                  config={configs.find((c) => c.action_name === request.name) ?? configs[j]}
                />
              ))}
            </ul>
          </div>
        );
      })}
    </div>
  );
}

function App() {
  const [threadId, setThreadId] = useState(query.get("thread"));
  const [text, setText] = useState("");
  const [input, setInput] = useState("{}");
  const [runs, setRuns] = useState([]);
  const stream = useStream({
    apiUrl,
    assistantId,
    apiKey: token ?? null, // null: no key (undefined would look for one in the environment)
    threadId,
    onThreadId: setThreadId,
    fetchStateHistory: true,
    onCreated: (run) => setRuns((seen) => [...seen, run.run_id]),
  });
  const messages = stream.messages;
  return (
    <main>
      <p>
        thread <span data-testid="thread-id">{threadId ?? ""}</span>, runs{" "}
        <span data-testid="run-ids">{runs.join(",")}</span>, loading{" "}
        <span data-testid="loading">{String(stream.isLoading)}</span>, history{" "}
        <span data-testid="history-count">{stream.history.length}</span>
      </p>
      <ol data-testid="messages" data-count={messages.length}>
        {messages.map((message, index) => (
          <Message key={message.id ?? index} stream={stream} message={message} index={index} />
        ))}
      </ol>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          stream.submit({ messages: [{ type: "human", content: text }] });
          setText("");
        }}
      >
        <input data-testid="chat-text" value={text} onChange={(e) => setText(e.target.value)} />
        <button data-testid="chat-send" type="submit" disabled={stream.isLoading}>
          send
        </button>
      </form>
      <div>
        <textarea
          data-testid="json-input"
          value={input}
          onChange={(event) => setInput(event.target.value)}
        />
        <button
          data-testid="json-send"
          disabled={stream.isLoading}
          onClick={() => stream.submit(JSON.parse(input))}
        >
          run
        </button>
      </div>
      <Interrupt stream={stream} />
      <pre data-testid="error">{errorText(stream.error)}</pre>
      <pre data-testid="values">{json(stream.values)}</pre>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
