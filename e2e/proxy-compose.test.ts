/**
 * docker-compose.yml wiring, without a Docker engine: the file is generated from
 * examples/compose-app/compose-definition.ts; this parses the file back (a tiny parser for the YAML
 * subset the generator emits), compares it with the object, and checks the proxy/app wiring.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { APP_STORE_MOUNT, composeDefinition, PROXY_PORT, PROXY_STORE, renderCompose, STORE_VOLUME } from '../examples/compose-app/compose-definition.ts'

const root = new URL('../', import.meta.url)
const read = (path: string) => readFileSync(new URL(path, root), 'utf8')

type Node = string | number | boolean | Node[] | { [k: string]: Node }

/** Parses block maps, block lists and JSON-quoted / numeric scalars, by indentation. */
function parseYaml(text: string): Node {
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.trimStart().startsWith('#'))
  let i = 0
  const indentOf = (l: string) => l.length - l.trimStart().length
  const scalar = (s: string): Node =>
    s === '{}' ? {} : s.startsWith('"') ? (JSON.parse(s) as string) : /^-?\d+$/.test(s) ? Number(s) : s === 'true' || s === 'false' ? s === 'true' : s
  function block(indent: number): Node {
    const first = lines[i] as string
    if (first.trimStart().startsWith('- ') || first.trim() === '-') {
      const list: Node[] = []
      while (i < lines.length && indentOf(lines[i] as string) === indent && (lines[i] as string).trimStart().startsWith('-')) {
        const item = (lines[i] as string).trim().slice(1).trim()
        i++
        list.push(item === '' ? block(indentOf(lines[i] as string)) : scalar(item))
      }
      return list
    }
    const map: Record<string, Node> = {}
    while (i < lines.length && indentOf(lines[i] as string) === indent) {
      const line = (lines[i] as string).trim()
      const m = /^([^:]+):(?: (.*))?$/.exec(line)
      assert.ok(m, `unparseable line: ${line}`)
      i++
      map[m[1] as string] = m[2] === undefined ? block(indentOf(lines[i] as string)) : scalar(m[2])
    }
    return map
  }
  return block(0)
}

test('docker-compose.yml is what compose-definition.ts renders, and parses back to the same object', () => {
  const file = read('docker-compose.yml')
  assert.equal(file, renderCompose(), 'docker-compose.yml is stale: run node examples/compose-app/compose-definition.ts')
  assert.deepEqual(parseYaml(file), JSON.parse(JSON.stringify(composeDefinition)))
})

test('the app reaches the proxy service and trusts the CA from the shared volume', () => {
  const { proxy, app } = composeDefinition.services
  const cmd = proxy.command
  assert.equal(cmd[0], 'serve')
  assert.equal(cmd[cmd.indexOf('--port') + 1], String(PROXY_PORT))
  assert.equal(cmd[cmd.indexOf('--host') + 1], '0.0.0.0', 'the proxy must listen beyond loopback inside its container')
  assert.equal(cmd[cmd.indexOf('--store') + 1], PROXY_STORE)
  assert.deepEqual(proxy.expose, [String(PROXY_PORT)])
  assert.ok(!('ports' in proxy), 'the proxy port is not published to the host')
  for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) assert.equal(app.environment[k as 'HTTPS_PROXY'], `http://proxy:${PROXY_PORT}`)
  assert.equal(app.environment.NO_PROXY, '')
  assert.equal(app.environment.NODE_USE_ENV_PROXY, '1')
  // The same volume: the proxy's <store>/ca/ca.pem is the app's NODE_EXTRA_CA_CERTS.
  assert.ok(proxy.volumes.includes(`${STORE_VOLUME}:${PROXY_STORE}`))
  assert.ok(app.volumes.includes(`${STORE_VOLUME}:${APP_STORE_MOUNT}:ro`))
  assert.equal(app.environment.NODE_EXTRA_CA_CERTS, `${APP_STORE_MOUNT}/ca/ca.pem`)
  assert.equal(proxy.healthcheck.test.at(-1), `${PROXY_STORE}/ca/ca.pem`)
  assert.equal(app.depends_on.proxy.condition, 'service_healthy')
  assert.ok(STORE_VOLUME in composeDefinition.volumes)
})

test('the Dockerfiles exist and run what compose expects', () => {
  const proxyFile = read(composeDefinition.services.proxy.build.dockerfile)
  assert.match(proxyFile, /ENTRYPOINT \["node", "bin\/tr-proxy.js"\]/)
  assert.match(proxyFile, /COPY proxy \.\/proxy/)
  assert.match(proxyFile, /EXPOSE 8080/)
  const appFile = read(`${composeDefinition.services.app.build.context}/Dockerfile`)
  assert.match(appFile, /CMD \["node", "app.mjs"\]/)
  assert.match(read('examples/compose-app/app.mjs'), /await fetch\(url\)/)
})
