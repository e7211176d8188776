/** The LLM app's scenario names, shared by the app (llm-app.ts) and the tests, without loading any SDK. */

/** Suffix of a scenario name that runs it with its first prompt changed, n-th way: `openai-chat~changed-2`. */
export const CHANGED = '~changed-'

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

/** How many differently changed prompts a library's miss is measured with. */
export const MISS_TRIES = 3

/** The scenario names of one miss measurement's changed calls. */
export const changedRuns = (scenario: string): string[] => Array.from({ length: MISS_TRIES }, (_, i) => `${scenario}${CHANGED}${i + 1}`)

/**
 * The app run that measures a library's miss: the recorded scenario first (it replays, and warms the
 * connection, the proxy's TLS session and the SDK), then the scenario with its first prompt changed, three
 * different ways (three distinct misses, so none folds into another's ledger entry). Without the warm-up the
 * number would mostly be a cold TLS handshake through the MITM proxy, which a hit pays too; the refusal
 * is what this measures, and the best of three keeps one descheduled moment on a loaded CI machine from
 * deciding the result (every try is still checked for the SDK's error, and the ledger for no retries).
 */
export const missRun = (scenario: string): string[] => [scenario, ...changedRuns(scenario)]
