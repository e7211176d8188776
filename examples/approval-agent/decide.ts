/**
 * The agent as a command: decides ticket A-1042 and prints the decision. It knows nothing about Tool Replay;
 * under `tr-proxy record|replay -- node examples/approval-agent/decide.ts` its model and refund calls go
 * through the proxy (Node >= 22.21 / 24 honour HTTPS_PROXY with NODE_USE_ENV_PROXY=1, which the proxy sets).
 */
import { decideRefund, describeDecision, TICKET_A1042 } from './app.ts'

console.log(describeDecision(await decideRefund(TICKET_A1042)))
