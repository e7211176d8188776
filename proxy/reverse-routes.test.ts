import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes } from '../trace/index.ts'
import { localizeLocation, parseReverse, ReverseRoutes, reverseEnvironment } from './reverse-routes.ts'

const LOCAL = 'http://127.0.0.1:8080'

test('parseReverse: URL at /, NAME=URL under /NAME/, base paths kept without trailing slash', () => {
  assert.deepEqual(parseReverse(['https://api.openai.com', 'anthropic=https://api.anthropic.com/', 'crm=http://crm.test:3000/api/']), [
    { name: undefined, origin: 'https://api.openai.com', basePath: '' },
    { name: 'anthropic', origin: 'https://api.anthropic.com', basePath: '' },
    { name: 'crm', origin: 'http://crm.test:3000', basePath: '/api' },
  ])
})

test('parseReverse refuses what cannot be a mount, naming the value and the fix', () => {
  const cases: Array<[string[], RegExp]> = [
    [['api.openai.com'], /not an absolute URL/],
    [['ftp://x.test'], /ftp: is not http: or https:/],
    [['https://user:pw@x.test'], /credentials in the URL/],
    [['https://x.test/?a=1'], /without query or fragment/],
    [['https://a.test', 'https://b.test'], /only one upstream can be served at \//],
    [['x=https://a.test', 'x=https://b.test'], /the name "x" is used twice/],
  ]
  for (const [values, why] of cases) {
    assert.throws(
      () => parseReverse(values),
      (err: Error & { code?: string }) =>
        err.code === ErrorCodes.INVALID_OPTION && why.test(err.message) && /Invalid --reverse ".*": .*NAME=URL/.test(err.message),
      values.join(' '),
    )
  }
})

test('resolve: a named mount by its first path segment, else the mount at /; query kept', () => {
  const routes = new ReverseRoutes(parseReverse(['https://api.openai.com', 'anthropic=https://api.anthropic.com', 'crm=http://crm.test/api']))
  assert.equal(routes.resolve('/v1/chat/completions?x=1')?.url, 'https://api.openai.com/v1/chat/completions?x=1')
  assert.equal(routes.resolve('/anthropic/v1/messages')?.url, 'https://api.anthropic.com/v1/messages')
  assert.equal(routes.resolve('/anthropic')?.url, 'https://api.anthropic.com/')
  assert.equal(routes.resolve('/crm/customers/42')?.url, 'http://crm.test/api/customers/42')
  assert.equal(routes.resolve('/crm?page=2')?.url, 'http://crm.test/api?page=2')
  // Only a whole segment selects a mount.
  assert.equal(routes.resolve('/anthropicx/v1')?.url, 'https://api.openai.com/anthropicx/v1')
  // A target cannot move the request off the upstream's origin.
  for (const sneaky of ['//evil.test/x', '/@evil.test/x', '/\\evil.test/x']) assert.equal(new URL(routes.resolve(sneaky)?.url as string).host, 'api.openai.com')
  const namedOnly = new ReverseRoutes(parseReverse(['a=https://a.test']))
  assert.equal(namedOnly.resolve('/b/x'), undefined)
  assert.equal(namedOnly.resolve('*'), undefined)
})

test('localize: the local URL standing for an upstream URL (the longest base path wins)', () => {
  const routes = new ReverseRoutes(parseReverse(['https://api.openai.com', 'crm=http://crm.test/api', 'crmv2=http://crm.test/api/v2']))
  assert.equal(routes.localize('https://api.openai.com/v1/files/1?x=2', LOCAL), `${LOCAL}/v1/files/1?x=2`)
  assert.equal(routes.localize('http://crm.test/api/customers', LOCAL), `${LOCAL}/crm/customers`)
  assert.equal(routes.localize('http://crm.test/api/v2/customers', LOCAL), `${LOCAL}/crmv2/customers`)
  assert.equal(routes.localize('http://crm.test/login', LOCAL), undefined)
  assert.equal(routes.localize('https://elsewhere.test/', LOCAL), undefined)
  assert.equal(routes.localize('https://api.openai.com:8443/v1', LOCAL), undefined)
})

test('redirects: absolute and path-absolute Locations into a mount become local; others stay', () => {
  const routes = new ReverseRoutes(parseReverse(['openai=https://api.openai.com', 'files=https://files.test']))
  const from = 'https://api.openai.com/v1/files/1/content'
  const loc = (v: string) => localizeLocation(v, from, routes, LOCAL)
  assert.equal(loc('https://api.openai.com/v1/files/2'), `${LOCAL}/openai/v1/files/2`)
  assert.equal(loc('/v1/files/2'), '/openai/v1/files/2')
  assert.equal(loc('https://files.test/blob/9?sig=1'), `${LOCAL}/files/blob/9?sig=1`)
  assert.equal(loc('//files.test/blob/9'), `${LOCAL}/files/blob/9`)
  // Relative ones resolve the same on both sides; unmapped ones are left for the client to follow.
  assert.equal(loc('../2'), '../2')
  assert.equal(loc('https://cdn.test/x'), 'https://cdn.test/x')
})

test('reverseEnvironment: the variables a wrapped command gets', () => {
  const one = new ReverseRoutes(parseReverse(['https://api.openai.com']))
  assert.deepEqual(reverseEnvironment(one, LOCAL), { TOOL_REPLAY_REVERSE_URL: LOCAL, OPENAI_BASE_URL: `${LOCAL}/v1` })
  const many = new ReverseRoutes(parseReverse(['openai=https://api.openai.com/v1', 'anthropic=https://api.anthropic.com', 'my-crm=https://crm.test']))
  assert.deepEqual(reverseEnvironment(many, LOCAL), {
    TOOL_REPLAY_REVERSE_URL_OPENAI: `${LOCAL}/openai`,
    TOOL_REPLAY_REVERSE_URL_ANTHROPIC: `${LOCAL}/anthropic`,
    TOOL_REPLAY_REVERSE_URL_MY_CRM: `${LOCAL}/my-crm`,
    OPENAI_BASE_URL: `${LOCAL}/openai`,
    ANTHROPIC_BASE_URL: `${LOCAL}/anthropic`,
  })
})
