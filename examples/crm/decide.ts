/**
 * The app as a command: prints the decision for a customer (default 42). For command cases:
 *   tr-proxy emit-test crm-inactive --command "node examples/crm/decide.ts 42" --expect-stdout "rejected" ...
 * Under `tr-proxy replay` it reaches https://crm.test through the proxy (Node >= 22.21 / 24 honour
 * HTTPS_PROXY with NODE_USE_ENV_PROXY=1, which the proxy sets).
 */
import { decide } from './app.ts'

console.log(await decide(process.argv[2] ?? '42'))
