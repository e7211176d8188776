import { runTraceStoreContract } from './fixtures/trace-store-contract.ts'
import { createMemoryStore } from './memory-store.ts'

runTraceStoreContract('memory', async () => ({ store: createMemoryStore() }))
