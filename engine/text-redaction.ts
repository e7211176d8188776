/**
 * Redaction of free text a run produced (a wrapped command's stdout and stderr, its command line): what the
 * secret scan recognises as a credential (engine/secret-scan.ts: API keys of well-known shapes, bearer tokens,
 * JWTs, private keys, URL passwords) and the values of this process's credential-looking environment variables
 * (OPENAI_API_KEY, GITHUB_TOKEN, ...) whatever their shape, each replaced by [REDACTED] before anything is stored.
 */
import { REDACTED } from './redaction.ts'
import { SECRET_SHAPES } from './secret-scan.ts'

/** Environment variable names whose values are credentials. */
const SECRET_ENV_NAME = /(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE)/i
/** Shorter values are not redacted by value: too likely to be ordinary words or numbers. */
const MIN_SECRET_VALUE = 8
const PRIVATE_KEY_BLOCK = /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|$)/g
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:)([^\s@/]+)@/gi

/** The values of credential-looking variables of `env` (at least 8 characters), longest first. */
export function secretEnvValues(env: NodeJS.ProcessEnv = process.env): string[] {
  const values = new Set<string>()
  for (const [name, value] of Object.entries(env)) if (value && value.length >= MIN_SECRET_VALUE && SECRET_ENV_NAME.test(name)) values.add(value)
  return [...values].sort((a, b) => b.length - a.length)
}

/**
 * `text` with every credential replaced by [REDACTED]: the shapes the secret scan knows, URL passwords, and
 * each of `values` wherever it occurs.
 * @example
 * redactText('using key sk-proj-abcdefghijklmnop1234', secretEnvValues()) // 'using key [REDACTED]'
 */
export function redactText(text: string, values: readonly string[] = []): string {
  let out = text
  for (const v of values) if (v.length >= MIN_SECRET_VALUE) out = out.split(v).join(REDACTED)
  out = out.replace(PRIVATE_KEY_BLOCK, REDACTED)
  out = out.replace(URL_PASSWORD, `$1${REDACTED}@`)
  for (const [kind, shape] of SECRET_SHAPES) {
    if (kind === 'private-key') continue
    out = out.replace(shape, (m) => (kind === 'bearer-token' ? `${m.slice(0, m.search(/\s/))} ${REDACTED}` : REDACTED))
  }
  return out
}
