import { existsSync } from 'node:fs'
import { readFile, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { rootCertificates } from 'node:tls'
import { PROXY_RUN_ENV } from '../engine/index.ts'
import type { CertificateAuthority } from './certificate-authority.ts'
import { caDir } from './certificate-authority.ts'

/** The Debian/Ubuntu system bundle; other systems fall back to Node's own roots. */
const SYSTEM_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'

/**
 * Writes `<store>/ca/bundle.pem`: the system roots plus the proxy CA, for clients that take one file
 * (curl, Python requests, OpenSSL, Go). Atomic: readers never see half a file.
 */
export async function writeCaBundle(storeDir: string, ca: CertificateAuthority): Promise<string> {
  const roots = existsSync(SYSTEM_BUNDLE) ? await readFile(SYSTEM_BUNDLE, 'utf8') : `${rootCertificates.join('\n')}\n`
  const file = join(caDir(storeDir), 'bundle.pem')
  const tmp = `${file}.${process.pid}.tmp`
  await writeFile(tmp, `${roots.trimEnd()}\n# Tool Replay proxy CA\n${ca.certPem}`, { mode: 0o644 })
  await rename(tmp, file)
  return file
}

/**
 * The environment that routes a process through the proxy and makes it trust the proxy CA.
 * NO_PROXY/no_proxy are set empty: a typical value excludes localhost, and test upstreams often live
 * there, so they would bypass the proxy (and strict replay) without it.
 */
export function proxyEnvironment(init: { proxyUrl: string; caPath: string; bundlePath: string; nodeOptions?: string }): Record<string, string> {
  return {
    NODE_OPTIONS: nodeOptionsWithoutProxyWarning(init.nodeOptions ?? process.env.NODE_OPTIONS),
    HTTP_PROXY: init.proxyUrl,
    HTTPS_PROXY: init.proxyUrl,
    http_proxy: init.proxyUrl,
    https_proxy: init.proxyUrl,
    NO_PROXY: '',
    no_proxy: '',
    NODE_USE_ENV_PROXY: '1',
    NODE_EXTRA_CA_CERTS: init.caPath,
    SSL_CERT_FILE: init.bundlePath,
    REQUESTS_CA_BUNDLE: init.bundlePath,
    CURL_CA_BUNDLE: init.bundlePath,
  }
}

/** Sealed, loopback inside the namespace is the command's own: clients keep it off the proxy. */
const SEALED_NO_PROXY = { NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1' }

/**
 * Tool Replay's variables for a command it runs behind its proxy (`tr-proxy record|replay -- <command>`, a command
 * case being verified): the proxy environment, and the marker that tells in-process test setups in the command
 * (tool-replay/node-test, /vitest) that this proxy captures; sealed, loopback is left to the command.
 */
export function wrappedCommandEnvironment(init: { proxyUrl: string; caPath: string; bundlePath: string; sealed?: boolean }): Record<string, string> {
  return {
    ...proxyEnvironment(init),
    ...(init.sealed ? SEALED_NO_PROXY : {}),
    [PROXY_RUN_ENV]: '1',
  }
}

/** The one warning the proxy environment silences: Node 22's "[UNDICI-EHPA] EnvHttpProxyAgent is experimental". */
export const PROXY_WARNING_FLAG = '--disable-warning=UNDICI-EHPA'

/**
 * NODE_OPTIONS with PROXY_WARNING_FLAG added once. With NODE_USE_ENV_PROXY=1, Node 22 prints that warning
 * on stderr in every wrapped Node process (Node 24 and 26 print none); `--disable-warning` (Node >= 20.11,
 * allowed in NODE_OPTIONS) drops exactly that code, every other warning still prints.
 */
export function nodeOptionsWithoutProxyWarning(current: string | undefined): string {
  const options = (current ?? '').trim()
  if (options.split(/\s+/).includes(PROXY_WARNING_FLAG)) return options
  return options === '' ? PROXY_WARNING_FLAG : `${options} ${PROXY_WARNING_FLAG}`
}

/** `export K='v'` lines for `eval "$(tr-proxy env)"`, single-quoted for POSIX shells. */
export function formatExports(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `export ${k}='${v.replaceAll("'", `'\\''`)}'`)
    .join('\n')
}
