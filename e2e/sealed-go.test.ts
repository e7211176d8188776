/**
 * A sealed run of a Go program with its own `http.Transport{Proxy: nil}` (it never reads the proxy variables):
 * recorded, then strictly replayed with the upstreams STOPPED and counting listeners at 0; identical outputs.
 * Built in the test's temp dir with the Go toolchain (stdlib only); skips, saying why, without `go`.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { cannotSeal, EXPECTED, has, recordThenReplay, sealedWork, URLS } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-go-')
})

const GO_CLIENT = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	// Proxy: nil: this client never reads HTTP_PROXY / HTTPS_PROXY.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	for _, u := range os.Args[1:] {
		r, err := client.Get(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		fmt.Printf("%d %s", r.StatusCode, b)
	}
}
`

describe('sealed runs: Go', { timeout: 300_000 }, () => {
  test('a Go program with its own Transport{Proxy: nil}', async (t) => {
    if (skip) return t.skip(skip)
    const missing = has('go', ['version'])
    if (missing) return t.skip(`go is not installed (${missing})`)
    const dir = join(work.work, 'go-client')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'go.mod'), 'module sealedclient\n\ngo 1.19\n')
    writeFileSync(join(dir, 'main.go'), GO_CLIENT)
    execFileSync('go', ['build', '-o', 'client', '.'], {
      cwd: dir,
      env: { ...process.env, GOFLAGS: '-mod=mod', GOCACHE: join(work.work, 'go-cache'), GOPATH: join(work.work, 'go-path') },
      stdio: 'pipe',
    })
    const { recorded, replayed } = await recordThenReplay(work.store, work.pki, 'go', [join(dir, 'client'), ...URLS])
    assert.equal(recorded, EXPECTED.join(''))
    assert.equal(replayed, recorded)
  })
})
