/** The LLM app's scenario names, shared by the app (llm-app.ts) and the tests, without loading any SDK. */

/** Suffix of a scenario name that runs it with its first prompt changed: `openai-chat~changed`. */
export const CHANGED = '~changed'

/** Every scenario of the app, in order (see llm-app.ts). */
export const ALL_SCENARIOS = [
  'openai-chat',
  'openai-chat-tool-stream',
  'openai-chat-text-stream',
  'openai-responses',
  'openai-responses-stream',
  'openai-structured',
  'openai-429',
  'openai-500',
  'openai-stream-cut',
  'anthropic-tool-loop',
  'ai-tool-loop',
  'langchain-tool-loop',
] as const

/** The scenario per library whose first request a changed prompt turns into a miss. */
export const MISS_SCENARIOS = { openai: 'openai-chat', anthropic: 'anthropic-tool-loop', ai: 'ai-tool-loop', langchain: 'langchain-tool-loop' } as const

/**
 * The app run that measures a library's miss: the recorded scenario first (it replays, and warms the
 * connection, the proxy's TLS session and the SDK), then the same scenario with its first prompt changed.
 * Without the warm-up the number would mostly be a cold TLS handshake through the MITM proxy on a
 * loaded CI machine, which a hit pays too; the refusal is what this measures.
 */
export const missRun = (scenario: string): string[] => [scenario, `${scenario}${CHANGED}`]
