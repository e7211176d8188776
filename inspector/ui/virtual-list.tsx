/** A virtualised list over @tanstack/virtual-core: only the rows in view (and a few around) are in the DOM. */
import { elementScroll, observeElementOffset, observeElementRect, Virtualizer } from '@tanstack/virtual-core'
import type { ComponentChildren } from 'preact'
import { useEffect, useLayoutEffect, useReducer, useRef, useState } from 'preact/hooks'

/** Props of VirtualList. */
export interface VirtualListProps {
  count: number
  estimate: (index: number) => number
  row: (index: number) => ComponentChildren
  /** Called with the first and last index in view, to load what they need. */
  onRange?: (first: number, last: number) => void
  /** Scrolls this index into view when it changes. */
  scrollTo?: number
  testId?: string
}

/** The list; rows are measured after they render, so their heights may vary. */
export function VirtualList(p: VirtualListProps) {
  const parent = useRef<HTMLDivElement>(null)
  const [, rerender] = useReducer((n: number) => n + 1, 0)
  const [v] = useState(
    () =>
      new Virtualizer<HTMLDivElement, Element>({
        count: p.count,
        getScrollElement: () => parent.current,
        estimateSize: p.estimate,
        overscan: 8,
        observeElementRect,
        observeElementOffset,
        scrollToFn: elementScroll,
        onChange: () => rerender(0),
      }),
  )
  v.setOptions({ ...v.options, count: p.count, estimateSize: p.estimate })
  useLayoutEffect(() => v._didMount(), [v])
  useLayoutEffect(() => v._willUpdate())
  const items = v.getVirtualItems()
  const first = items[0]?.index ?? 0
  const last = items.at(-1)?.index ?? 0
  useEffect(() => p.onRange?.(first, last), [first, last, p.count])
  useEffect(() => {
    if (p.scrollTo !== undefined && p.scrollTo >= 0) v.scrollToIndex(p.scrollTo, { align: 'auto' })
  }, [p.scrollTo])
  return (
    <div ref={parent} class="vlist" data-testid={p.testId}>
      <div style={{ height: `${v.getTotalSize()}px`, position: 'relative' }}>
        {items.map((it) => (
          <div
            key={it.key}
            data-index={it.index}
            ref={(el) => {
              if (el) v.measureElement(el)
            }}
            class="vrow"
            style={{ transform: `translateY(${it.start}px)` }}
          >
            {p.row(it.index)}
          </div>
        ))}
      </div>
    </div>
  )
}
