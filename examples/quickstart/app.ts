/**
 * The example app: asks a weather API for a forecast, then asks a chat model (OpenAI-style
 * endpoint) to turn it into advice. Plain fetch: it knows nothing about Tool Replay.
 */
export async function advise(baseUrl: string, city: string): Promise<string> {
  const forecast = (await (await fetch(`${baseUrl}/forecast?city=${encodeURIComponent(city)}`)).json()) as { rain: number }
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-quickstart-not-a-real-key' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Rain chance ${forecast.rain}% in ${city}. Umbrella?` }] }),
  })
  const completion = (await res.json()) as { choices: Array<{ message: { content: string } }> }
  return completion.choices[0]?.message.content ?? '(no answer)'
}
