/**
 * A gRPC service for the e2e tests, without protoc: JSON messages in gRPC's framing (5-byte prefix: the
 * compressed flag and the length), served and called with the real @grpc/grpc-js. A unary call, a
 * server-streaming one (three messages, 20 ms apart) and a unary call that fails with NOT_FOUND.
 */
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import * as grpc from '@grpc/grpc-js'

const json = {
  serialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  deserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
}

function method(path: string, responseStream: boolean) {
  return {
    path,
    requestStream: false,
    responseStream,
    requestSerialize: json.serialize,
    requestDeserialize: json.deserialize,
    responseSerialize: json.serialize,
    responseDeserialize: json.deserialize,
  }
}

/** The service: Greeter.SayHello (unary), Greeter.StreamHellos (server streaming), Greeter.Missing (NOT_FOUND). */
export const GREETER = {
  sayHello: method('/test.Greeter/SayHello', false),
  streamHellos: method('/test.Greeter/StreamHellos', true),
  missing: method('/test.Greeter/Missing', false),
} as const

export interface GrpcUpstream {
  port: number
  readonly connections: number
  calls: string[]
  close(): Promise<void>
}

/** Starts the Greeter on 127.0.0.1:0, over TLS with `tls`, else in cleartext (h2c). */
export async function startGreeter(tls?: { cert: string; key: string }): Promise<GrpcUpstream> {
  const state = { connections: 0, calls: [] as string[] }
  const server = new grpc.Server()
  server.addService(GREETER as unknown as grpc.ServiceDefinition, {
    sayHello(call: grpc.ServerUnaryCall<{ name: string }, unknown>, done: grpc.sendUnaryData<unknown>) {
      state.calls.push('SayHello')
      const md = new grpc.Metadata()
      md.set('x-greeter', 'yes')
      call.sendMetadata(md)
      done(null, { message: `hello ${call.request.name}` })
    },
    streamHellos(call: grpc.ServerWritableStream<{ name: string; count: number }, unknown>) {
      state.calls.push('StreamHellos')
      let i = 0
      const next = () => {
        if (i === call.request.count) {
          const trailer = new grpc.Metadata()
          trailer.set('x-sent', String(i))
          call.end(trailer)
          return
        }
        call.write({ n: i, message: `hello ${call.request.name} #${i}` })
        i++
        setTimeout(next, 20)
      }
      next()
    },
    missing(_call: grpc.ServerUnaryCall<unknown, unknown>, done: grpc.sendUnaryData<unknown>) {
      state.calls.push('Missing')
      done({ code: grpc.status.NOT_FOUND, details: 'no such greeting' })
    },
  })
  const credentials = tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }])
    : grpc.ServerCredentials.createInsecure()
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))))
  // grpc-js has no connection event: count the TCP connections its listener accepts.
  const listeners = (server as unknown as { http2Servers: Map<{ on(e: string, f: () => void): void }, unknown> }).http2Servers
  for (const s of listeners.keys()) s.on(tls ? 'secureConnection' : 'connection', () => state.connections++)
  return {
    port,
    get connections() {
      return state.connections
    },
    calls: state.calls,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())).then(() => server.forceShutdown()),
  }
}

type Call = (...args: unknown[]) => unknown
/** The generic client with the Greeter's methods. */
export type GreeterClient = grpc.Client & { sayHello: Call; streamHellos: Call; missing: Call }

/** A Greeter client. */
export function greeterClient(target: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions = {}): GreeterClient {
  const Client = grpc.makeGenericClientConstructor(GREETER as unknown as grpc.ServiceDefinition, 'Greeter')
  return new Client(target, credentials, options) as unknown as GreeterClient
}

/** What the app saw of the three calls. */
export interface GreeterRun {
  unary: { value: unknown; metadata: Record<string, unknown> }
  stream: { messages: unknown[]; status: { code: number; details: string; trailer: Record<string, unknown> } }
  missing: { code: number; details: string }
}

/** Makes the three calls on `client`. */
export async function callGreeter(client: GreeterClient): Promise<GreeterRun> {
  const unary = await new Promise<GreeterRun['unary']>((resolve, reject) => {
    let metadata: Record<string, unknown> = {}
    const call = client.sayHello({ name: 'Ada' }, (err: grpc.ServiceError | null, value: unknown) =>
      err ? reject(err) : resolve({ value, metadata }),
    ) as grpc.ClientUnaryCall
    call.on('metadata', (md: grpc.Metadata) => (metadata = md.getMap()))
  })
  const messages: unknown[] = []
  const call = client.streamHellos({ name: 'Bo', count: 3 }) as grpc.ClientReadableStream<unknown>
  call.on('data', (m: unknown) => messages.push(m))
  const [status] = (await once(call, 'status')) as [grpc.StatusObject]
  const missing = await new Promise<GreeterRun['missing']>((resolve) => {
    client.missing({}, (err: grpc.ServiceError | null) => resolve({ code: err?.code ?? 0, details: err?.details ?? '' }))
  })
  return { unary, stream: { messages, status: { code: status.code, details: status.details, trailer: status.metadata.getMap() } }, missing }
}

export type { AddressInfo }
