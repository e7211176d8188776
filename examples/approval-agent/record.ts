/**
 * Step 1 of the approval agent story: start the fake model provider and the fake refund service, run the
 * agent once on ticket A-1042 while recording every exchange into the store as trace "approval" (or
 * --trace NAME), then stop the fakes. Nothing after this step talks to them.
 *   node --conditions=tool-replay-source examples/approval-agent/record.ts [--trace approval] [--store DIR]
 * With APPROVAL_AGENT_FAKES="MODEL_PORT,REFUNDS_PORT" it uses fakes that are already running instead (the
 * e2e test runs them itself, to count what reaches them across every step).
 */
import { parseArgs } from 'node:util'
import { openStore } from 'tool-replay/store'
import { decideRefund, describeDecision, TICKET_A1042 } from './app.ts'
import { agentForFakes, parseFakesPorts, startFakeServices } from './fake-services.ts'
import { withInterceptor } from './session.ts'

const { values } = parseArgs({ options: { trace: { type: 'string', default: 'approval' }, store: { type: 'string' } } })
const store = await openStore(values.store ?? process.env.TOOL_REPLAY_STORE ?? '.tool-replay/store')
const running = process.env.APPROVAL_AGENT_FAKES
const fakes = running ? undefined : await startFakeServices()
const upstream = fakes ? fakes.agent() : agentForFakes(parseFakesPorts(running as string))
try {
  const run = await withInterceptor({ mode: 'record', trace: values.trace, store, upstream }, () => decideRefund(TICKET_A1042))
  if (run.error) throw run.error
  console.log(describeDecision(run.result as NonNullable<typeof run.result>))
  console.log(`recorded trace "${values.trace}" (${run.summary.recorded} exchanges)`)
} finally {
  // The fakes close the agents they handed out.
  await (fakes ? fakes.close() : upstream.close())
  await store.close()
}
