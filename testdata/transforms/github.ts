// GitHub pull-request transform: wakes an agent when a pull request is
// opened, skips every other event and action (204), the "ping" of a new
// webhook included.

interface User {
  login: string;
}

interface PullRequest {
  number: number;
  title: string;
  html_url: string;
  user: User;
}

interface PullRequestEvent {
  action: string;
  pull_request: PullRequest;
  repository: { full_name: string };
}

interface Ctx<P> {
  payload: P;
  headers: Record<string, string>;
  path: string;
}

interface AgentAction {
  kind: "agent";
  name: string;
  message: string;
  sessionKey: string;
}

// field reads a required property, failing with a clear message.
function field<T, K extends keyof T>(obj: T, key: K): NonNullable<T[K]> {
  const v = obj?.[key];
  if (v === undefined || v === null) {
    throw new Error(`missing field ${String(key)}`);
  }
  return v as NonNullable<T[K]>;
}

export default function transform(ctx: Ctx<PullRequestEvent>): AgentAction | null {
  if (ctx.headers["x-github-event"] !== "pull_request") return null;
  const event = ctx.payload;
  if (event.action !== "opened") return null;
  const pr = field(event, "pull_request");
  const repo = field(field(event, "repository"), "full_name");
  const user = field(field(pr, "user"), "login");
  return {
    kind: "agent",
    name: "GitHub",
    message: `PR #${pr.number} opened in ${repo} by ${user}: ${pr.title}\n${pr.html_url}`,
    sessionKey: `hook:github:pr:${repo}#${pr.number}`,
  };
}
