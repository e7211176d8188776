/**
 * Runs the agent on ticket A-1042 against a trace in strict replay: no network at all, no key (the fakes
 * are not running). With --record-as, what the app did is kept as another trace, for `tr-proxy diff`.
 *   node --conditions=tool-replay-source examples/approval-agent/run.ts --trace approval [--record-as NAME] [--store DIR]
 * Prints the decision; exits 69 (as `tr-proxy replay` does) when strict replay failed: a request the trace
 * does not hold, or recorded exchanges the app no longer made.
 */
import { parseArgs } from 'node:util'
import { EXIT_CODES } from 'tool-replay/cli'
import { formatSummary } from 'tool-replay/engine'
import { openStore } from 'tool-replay/store'
import { ErrorCodes } from 'tool-replay/trace'
import { decideRefund, describeDecision, TICKET_A1042 } from './app.ts'
import { agentForFakes, parseFakesPorts } from './fake-services.ts'
import { withInterceptor } from './session.ts'

const { values } = parseArgs({ options: { trace: { type: 'string', default: 'approval' }, 'record-as': { type: 'string' }, store: { type: 'string' } } })
const store = await openStore(values.store ?? process.env.TOOL_REPLAY_STORE ?? '.tool-replay/store')
// Strict replay forwards nothing. When the e2e test's counting fakes run, anything forwarded would reach
// them (and be counted), instead of failing on DNS for a name that does not exist.
const running = process.env.APPROVAL_AGENT_FAKES
const upstream = running ? agentForFakes(parseFakesPorts(running)) : undefined
try {
  const run = await withInterceptor(
    { mode: 'replay', trace: values.trace, store, ...(values['record-as'] ? { recordAs: values['record-as'] } : {}), ...(upstream ? { upstream } : {}) },
    () => decideRefund(TICKET_A1042),
  )
  if (run.result) console.log(describeDecision(run.result))
  if (!run.summary.ok) {
    console.error(formatSummary(run.summary))
    process.exitCode = EXIT_CODES[ErrorCodes.REPLAY_INCOMPLETE]
  } else if (run.error) {
    console.error(`the app failed: ${(run.error as Error).message}`)
    process.exitCode = 1
  }
} finally {
  await upstream?.close()
  await store.close()
}
