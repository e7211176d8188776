/**
 * The app under test: asks the CRM about a customer and decides. It knows nothing about Tool Replay;
 * it just calls fetch. The CRM lives at https://crm.test (override with CRM_URL).
 */

/** The decision the app makes for a customer. */
export type Decision = 'approved' | 'rejected'

/** Fetches the customer from the CRM and approves only active customers. */
export async function decide(customerId: string): Promise<Decision> {
  const base = process.env.CRM_URL ?? 'https://crm.test'
  const res = await fetch(`${base}/customers/${encodeURIComponent(customerId)}`)
  if (!res.ok) throw new Error(`CRM answered ${res.status} for customer ${customerId}`)
  const customer = (await res.json()) as { active?: unknown }
  return customer.active === true ? 'approved' : 'rejected' // the rule
}

/** Case runner (`tr-proxy emit-test --runner examples/crm/app.ts#decideCustomer42`): exercises the app for customer 42. */
export async function decideCustomer42(): Promise<Decision> {
  return decide('42')
}
