/**
 * The app under test: a refund approval agent. A model (the real `openai` SDK, Chat Completions with tools)
 * looks the order up with the `check_refund` tool, which the app answers by calling the refund service
 * (`GET https://refunds.test/v1/orders/:id/refund-check`), then decides with `decide_refund`. The app never
 * takes the model's numbers on trust: it approves at most what the refund service says is refundable, and
 * anything else goes to a human (`manual_review`). It knows nothing about Tool Replay.
 *
 * Endpoints: the model at $OPENAI_BASE_URL (default https://api.openai.test/v1, the example's local fake),
 * the refund service at $REFUNDS_URL (default https://refunds.test).
 */
import OpenAI from 'openai'
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions'

/** What the app decided, and why. */
export interface Decision {
  decision: 'approved' | 'declined' | 'manual_review'
  order_id: string
  /** The amount at stake: what the model approved (or asked for), in US dollars. */
  amount_usd: number
  reason: string
}

/** The refund service's answer for an order (amounts in cents, as payment APIs keep them). */
interface RefundCheck {
  order_id: string
  refundable_cents: number
}

/** The support ticket the example records: a blender that arrived broken. */
export const TICKET_A1042 = 'Hi, order A-1042 arrived yesterday and the blender jar is cracked. I would like a refund, please. Dana'

const MODEL = 'gpt-4.1-mini'
/** Tool rounds before the app gives up on the model and asks a human. */
const MAX_TURNS = 4

const POLICY = [
  'You are the refund approval agent of Acme Kitchen.',
  'First call check_refund for the order in the ticket.',
  'Then call decide_refund once: approve at most the refundable amount when the policy allows it, otherwise decline.',
  'Amounts are in US dollars.',
].join(' ')

const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'check_refund',
      description: 'Ask the refund service what can be refunded for an order, and under which policy.',
      parameters: {
        type: 'object',
        properties: { order_id: { type: 'string', description: 'The order id, e.g. A-1042' } },
        required: ['order_id'],
        additionalProperties: false,
      },
      strict: true,
    },
  },
  {
    type: 'function',
    function: {
      name: 'decide_refund',
      description: 'Record your decision on the refund request.',
      parameters: {
        type: 'object',
        properties: {
          decision: { type: 'string', enum: ['approve', 'decline'] },
          amount_usd: { type: 'number', description: 'The amount to refund, in US dollars (0 when declining)' },
          reason: { type: 'string', description: 'One sentence for the support team' },
        },
        required: ['decision', 'amount_usd', 'reason'],
        additionalProperties: false,
      },
      strict: true,
    },
  },
]

/** Runs the agent on one support ticket and returns the app's decision. */
export async function decideRefund(ticket: string): Promise<Decision> {
  const openai = new OpenAI({
    // Replay needs no key (the authorization header is redacted when recorded and never matched), but the SDK
    // insists on one: a placeholder when none is set.
    apiKey: process.env.OPENAI_API_KEY || 'no-key-needed-offline',
    baseURL: process.env.OPENAI_BASE_URL ?? 'https://api.openai.test/v1',
  })
  const messages: ChatCompletionMessageParam[] = [
    { role: 'system', content: POLICY },
    { role: 'user', content: ticket },
  ]
  let check: RefundCheck | undefined
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const completion = await openai.chat.completions.create({ model: MODEL, messages, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false })
    const message = completion.choices[0]?.message
    const call = message?.tool_calls?.[0]
    if (!message || call?.type !== 'function') return review('?', 0, `the model answered without a tool call (finish: ${completion.choices[0]?.finish_reason})`)
    const args = parseArguments(call.function.arguments)
    if (call.function.name === 'check_refund' && typeof args?.order_id === 'string') {
      check = await checkRefund(args.order_id)
      messages.push(message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify(check) })
      continue
    }
    if (call.function.name === 'decide_refund' && args) return applyPolicy(args, check)
    return review(check?.order_id ?? '?', 0, `the model called ${call.function.name} with arguments the app cannot use: ${call.function.arguments}`)
  }
  return review(check?.order_id ?? '?', 0, `no decision after ${MAX_TURNS} model turns`)
}

/** Case runner (`tr-proxy emit-test --runner examples/approval-agent/app.ts#decideTicketA1042`): what was decided, for which order, about how much. */
export async function decideTicketA1042(): Promise<Omit<Decision, 'reason'>> {
  const { decision, order_id, amount_usd } = await decideRefund(TICKET_A1042)
  return { decision, order_id, amount_usd }
}

/** The app's rule on the model's decision: the refund service, not the model, says how much can go back. */
function applyPolicy(args: Record<string, unknown>, check: RefundCheck | undefined): Decision {
  const amount = typeof args.amount_usd === 'number' ? args.amount_usd : Number.NaN
  const reason = typeof args.reason === 'string' ? args.reason : ''
  if (!check) return review('?', amount, 'the model decided without checking the order with the refund service')
  if (args.decision === 'decline') return { decision: 'declined', order_id: check.order_id, amount_usd: 0, reason }
  if (args.decision !== 'approve' || !Number.isFinite(amount) || amount <= 0)
    return review(check.order_id, amount, `the model's decision is not one the app can act on: ${JSON.stringify(args)}`)
  if (Math.round(amount * 100) > check.refundable_cents)
    return review(check.order_id, amount, `the model approved ${usd(amount)}, but the refund service allows at most ${usd(check.refundable_cents / 100)}`)
  return { decision: 'approved', order_id: check.order_id, amount_usd: amount, reason }
}

/** Calls the refund service (the `check_refund` tool). */
async function checkRefund(orderId: string): Promise<RefundCheck> {
  const base = process.env.REFUNDS_URL ?? 'https://refunds.test'
  const res = await fetch(`${base}/v1/orders/${encodeURIComponent(orderId)}/refund-check`)
  if (!res.ok) throw new Error(`the refund service answered ${res.status} for order ${orderId}`)
  return (await res.json()) as RefundCheck
}

function parseArguments(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined // a model can emit broken JSON; that is a case for a human, not a crash
  }
}

function review(orderId: string, amount: number, reason: string): Decision {
  return { decision: 'manual_review', order_id: orderId, amount_usd: amount, reason }
}

/** One line for people: `decision: approved $89.99 for order A-1042 (the model's reason)`. */
export function describeDecision(d: Decision): string {
  return `decision: ${d.decision} ${usd(d.amount_usd)} for order ${d.order_id} (${d.reason})`
}

/** $89.99 */
export function usd(amount: number): string {
  return `$${amount.toFixed(2)}`
}
