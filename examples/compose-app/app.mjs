// Example app: one HTTPS request through the proxy (HTTPS_PROXY + NODE_USE_ENV_PROXY=1), trusting the
// proxy CA through NODE_EXTRA_CA_CERTS. Nothing in the app knows about Tool Replay.
const url = process.env.TARGET_URL || 'https://example.com/'
const res = await fetch(url)
const body = await res.text()
console.log(`${res.status} ${url} (${body.length} bytes)`)
process.exitCode = res.ok ? 0 : 1
