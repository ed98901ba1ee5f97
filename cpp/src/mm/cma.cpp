// CMA areas, cma_alloc and cma_release (see cma.hpp): mm/cma.c of the seed's tree (v6.14-rc mm-unstable) with the
// per-CMA lock patch as a switch.
#include "alloclab/mm/cma.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "alloclab/base/clock.hpp"

namespace alloclab::mm {

namespace {

[[noreturn]] void bad_arg(const std::string& msg) { throw std::invalid_argument(msg); }

// The cost of words [first, last) of a bitmap read or written: a bitmap_word each, on the lines that hold them
// (a scan of an array: their misses overlap).
void bitmap_words(std::span<const uint64_t> m, uint64_t first, uint64_t last, bool write) {
  CostModel* cm = vcost::active();
  if (!cm || first >= last) [[likely]]
    return;
  cm->charge(Op::bitmap_word, last - first);
  constexpr uint64_t kWordsPerLine = 64 / sizeof(uint64_t);
  // m is line-aligned (line_vector), so word w sits on line w / kWordsPerLine.
  cm->touch_each(&m[first], (last - 1) / kWordsPerLine - first / kWordsPerLine + 1, 64, write);
}

uint64_t find_next_bit(std::span<const uint64_t> m, uint64_t size, uint64_t start, bool value) {
  uint64_t found = size;
  for (uint64_t i = start; i < size;) {
    const uint64_t w = value ? m[i / 64] : ~m[i / 64];
    const uint64_t rest = w >> (i % 64);
    if (rest) {
      found = std::min(i + uint64_t(std::countr_zero(rest)), size);
      break;
    }
    i = (i / 64 + 1) * 64;
  }
  if (start < size) bitmap_words(m, start / 64, (std::min(found, size - 1)) / 64 + 1, false);
  return found;
}

void bitmap_set(std::span<uint64_t> m, uint64_t start, uint64_t nr) {
  bitmap_words(m, start / 64, (start + nr + 63) / 64, true);
  for (uint64_t i = start; i < start + nr; ++i) m[i / 64] |= uint64_t(1) << (i % 64);
}
void bitmap_clear(std::span<uint64_t> m, uint64_t start, uint64_t nr) {
  bitmap_words(m, start / 64, (start + nr + 63) / 64, true);
  for (uint64_t i = start; i < start + nr; ++i) m[i / 64] &= ~(uint64_t(1) << (i % 64));
}

// cma_bitmap_aligned_mask / cma_bitmap_aligned_offset / cma_bitmap_pages_to_bits.
uint64_t cma_bitmap_aligned_mask(const Cma& cma, unsigned align_order) {
  if (align_order <= cma.order_per_bit) return 0;
  return (uint64_t(1) << (align_order - cma.order_per_bit)) - 1;
}
uint64_t cma_bitmap_aligned_offset(const Cma& cma, unsigned align_order) {
  return (cma.base_pfn & ((uint64_t(1) << align_order) - 1)) >> cma.order_per_bit;
}
uint64_t cma_bitmap_pages_to_bits(const Cma& cma, uint64_t pages) {
  const uint64_t unit = uint64_t(1) << cma.order_per_bit;
  return ((pages + unit - 1) & ~(unit - 1)) >> cma.order_per_bit;
}

// init_cma_reserved_pageblock for a pageblock whose pages the buddy allocator already holds (the model frees all
// memory at construction; the kernel keeps CMA pages reserved until cma_activate_area frees them as MIGRATE_CMA
// with __free_pages(page, pageblock_order)). Each free block of the pageblock is taken off its list and freed again
// as CMA, so it merges with a CMA buddy as the kernel's free would: two adjacent 512-page areas end as one order-10
// block, which is the state every later free returns to. zone->lock held. Returns the pages moved.
long init_cma_reserved_pageblock(Zone& zone, uint64_t pfn, uint64_t area_start, uint64_t area_end) {
  // A free max-order block that reaches outside the area is split first, so only the area's part changes type.
  split_free_page_outside(zone, pfn, area_start, area_end);
  Page* page = zone.pfn_to_page(pfn);
  zone.set_pageblock_migratetype(page, MIGRATE_CMA);
  // Off the lists first, then freed: a block must not merge with a buddy that is still on its old list.
  std::vector<std::pair<uint64_t, unsigned>> blocks;
  for (uint64_t p = pfn; p < pfn + pageblock_nr_pages && zone.zone_spans_pfn(p);) {
    Page* pg = zone.pfn_to_page(p);
    if (!PageBuddy(*pg)) {
      ++p;
      continue;
    }
    const unsigned order = buddy_order(*pg);
    zone.__mod_zone_freepage_state(-(long(1) << order), int(pg->buddy_list_mt));
    del_page_from_free_list(pg, zone, order);
    blocks.emplace_back(p, order);
    p += uint64_t(1) << order;
  }
  long moved = 0;
  for (auto [p, order] : blocks) {
    __free_one_page(zone.pfn_to_page(p), p, zone, order, MIGRATE_CMA, FPI_NONE);
    moved += long(1) << order;
  }
  return moved;
}

}  // namespace

uint64_t bitmap_find_next_zero_area_off(std::span<const uint64_t> map, uint64_t size, uint64_t start, uint64_t nr,
                                        uint64_t align_mask, uint64_t align_offset) {
  for (;;) {
    uint64_t index = find_next_bit(map, size, start, false);
    // Align allocation: __ALIGN_MASK(index + align_offset, align_mask) - align_offset.
    index = ((index + align_offset + align_mask) & ~align_mask) - align_offset;
    const uint64_t end = index + nr;
    if (end > size) return end;
    const uint64_t i = find_next_bit(map, end, index, true);
    if (i < end) {
      start = i + 1;
      continue;
    }
    return index;
  }
}

// ---- struct cma ---------------------------------------------------------------------------------------------------

Cma::Cma(LockDomain& locks, std::string n, int node, uint64_t base, uint64_t pages, unsigned opb, Lock* global)
    : name(std::move(n)),
      nid(node),
      base_pfn(base),
      count(pages),
      order_per_bit(opb),
      lock(locks, "cma->lock"),
      alloc_mutex(locks, "cma->alloc_mutex"),
      alloc_lock_(global ? global : &alloc_mutex),
      available_count_(pages),
      bitmap_(((pages >> opb) + 63) / 64, 0) {}

uint64_t Cma::bits_set() const {
  uint64_t n = 0;
  for (uint64_t w : bitmap_) n += uint64_t(std::popcount(w));
  return n;
}

// ---- declaration and activation -----------------------------------------------------------------------------------

std::vector<CmaAreaSpec> CmaAreas::one_per_node(const MemorySystem& ms, uint64_t pages) {
  std::vector<CmaAreaSpec> v;
  for (int n = 0; n < ms.nr_nodes(); ++n)
    if (ms.node_present_pages(n)) v.push_back({n, pages});
  return v;
}

CmaAreas::CmaAreas(MemorySystem& ms, LockDomain& locks, const std::vector<CmaAreaSpec>& areas, AllocMutex mode,
                   unsigned order_per_bit)
    : cma_mutex(locks, "cma_mutex"), ms_(ms), mode_(mode) {
  if (order_per_bit > 20)
    bad_arg("order_per_bit: " + std::to_string(order_per_bit) + " is out of range (allowed: 0..20)");
  const uint64_t unit = std::max<uint64_t>(pageblock_nr_pages, uint64_t(1) << order_per_bit);
  // cma_declare_contiguous_nid: validate everything, place each area top-down in its node.
  std::vector<uint64_t> top(size_t(ms.nr_nodes()));
  for (int n = 0; n < ms.nr_nodes(); ++n) top[size_t(n)] = ms.node_start_pfn(n) + ms.node_present_pages(n);
  std::vector<uint64_t> bases;
  for (size_t i = 0; i < areas.size(); ++i) {
    const CmaAreaSpec& a = areas[i];
    const std::string at = "cma_areas[" + std::to_string(i) + "]: ";
    if (a.nid < 0 || a.nid >= ms.nr_nodes() || !ms.node_present_pages(a.nid))
      bad_arg(at + "node " + std::to_string(a.nid) + " has no memory (allowed: a node of the model with memory)");
    if (a.pages == 0 || a.pages % unit)
      bad_arg(at + std::to_string(a.pages) + " pages is not allowed (allowed: a positive multiple of " +
              std::to_string(unit) + " pages: whole pageblocks and whole bitmap bits of 2^" +
              std::to_string(order_per_bit) + " pages)");
    const uint64_t start = ms.node_start_pfn(a.nid);
    uint64_t& t = top[size_t(a.nid)];
    const uint64_t end = t & ~(pageblock_nr_pages - 1);
    if (end < start || end - start < a.pages)
      bad_arg(at + std::to_string(a.pages) + " pages do not fit node " + std::to_string(a.nid) + ", which has " +
              std::to_string(end > start ? end - start : 0) + " pages left below the areas already declared");
    t = end - a.pages;
    bases.push_back(t);
  }
  // Every page of every area must still be free: CMA memory is reserved at boot, before anything allocates.
  for (size_t i = 0; i < areas.size(); ++i) {
    Zone& zone = ms.zone(areas[i].nid);
    const uint64_t base = bases[i], end = base + areas[i].pages;
    uint64_t pfn = std::max(zone.zone_start_pfn, base & ~(MAX_ORDER_NR_PAGES - 1));
    while (pfn < end) {
      ms.interruption_point();
      const Page* p = zone.pfn_to_page(pfn);
      if (PageBuddy(*p)) {
        pfn += uint64_t(1) << buddy_order(*p);
      } else if (pfn >= base) {
        bad_arg("cma_areas[" + std::to_string(i) + "]: pfn " + std::to_string(pfn) +
                " is already in use (declare CMA areas right after building the MemorySystem)");
      } else {
        ++pfn;
      }
    }
  }
  // cma_activate_area: every pageblock becomes MIGRATE_CMA and its free pages go to the CMA lists.
  for (size_t i = 0; i < areas.size(); ++i) {
    const CmaAreaSpec& a = areas[i];
    Zone& zone = ms.zone(a.nid);
    const uint64_t base = bases[i], end = base + a.pages;
    long moved = 0;
    for (uint64_t pfn = base; pfn < end; pfn += pageblock_nr_pages) {
      ms.interruption_point();
      LockToken t;  // zone->lock per pageblock, as the kernel's __free_pages() of each one takes it
      zone.lock_zone(t);
      moved += init_cma_reserved_pageblock(zone, pfn, base, end);
      zone.unlock_zone(t);
    }
    if (uint64_t(moved) != a.pages)
      throw std::logic_error("cma_activate_area: moved " + std::to_string(moved) + " free pages of " +
                             std::to_string(a.pages));
    areas_.push_back(std::make_unique<Cma>(locks, "cma" + std::to_string(i), a.nid, base, a.pages, order_per_bit,
                                           mode == AllocMutex::global ? &cma_mutex : nullptr));
  }
}

Cma* CmaAreas::find(uint64_t pfn) const {
  for (const auto& c : areas_)
    if (c->contains(pfn)) return c.get();
  return nullptr;
}

std::vector<std::string> CmaAreas::check(bool idle) const {
  std::vector<std::string> errors;
  for (const auto& c : areas_) {
    const std::string at = c->name + " (node " + std::to_string(c->nid) + "): ";
    const uint64_t bits = c->bits_set();
    const uint64_t avail = c->available_count();
    if (avail > c->count) errors.push_back(at + "available_count " + std::to_string(avail) + " exceeds its size");
    if ((bits == 0) != (avail == c->count))
      errors.push_back(at + std::to_string(bits) + " bitmap bits set but available_count is " + std::to_string(avail) +
                       " of " + std::to_string(c->count));
    if (bits << c->order_per_bit < c->count - avail)
      errors.push_back(at + std::to_string(bits) + " bits cover fewer pages than the " +
                       std::to_string(c->count - avail) + " handed out");
    if (idle && (bits || avail != c->count))
      errors.push_back(at + "not idle: " + std::to_string(bits) + " bits set, available_count " +
                       std::to_string(avail));
    const Zone& zone = ms_.zone(c->nid);
    for (uint64_t pfn = c->base_pfn; pfn < c->base_pfn + c->count; pfn += pageblock_nr_pages) {
      ms_.interruption_point();
      const int mt = zone.get_pfnblock_migratetype(pfn);
      if (mt != MIGRATE_CMA && (idle || mt != MIGRATE_ISOLATE)) {
        errors.push_back(at + "pageblock at pfn " + std::to_string(pfn) + " is " + migratetype_name(mt) + ", not CMA");
        break;
      }
    }
  }
  return errors;
}

// ---- cma_alloc / cma_release --------------------------------------------------------------------------------------

void cma_clear_bitmap(Cma& cma, uint64_t pfn, uint64_t count) {
  const uint64_t bitmap_no = (pfn - cma.base_pfn) >> cma.order_per_bit;
  const uint64_t bitmap_count = cma_bitmap_pages_to_bits(cma, count);
  LockToken t;
  cma.lock.lock(t);
  bitmap_clear(cma.bitmap_, bitmap_no, bitmap_count);
  cma.available_count_ += count;
  cma.lock.unlock(t);
}

namespace {
void check_alloc_args(const Cma& cma, uint64_t count, uint64_t align) {
  if (count == 0 || count > cma.count)
    bad_arg("count: " + std::to_string(count) + " pages is out of range for " + cma.name + " (allowed: 1.." +
            std::to_string(cma.count) + ")");
  if (align == 0 || !std::has_single_bit(align))
    bad_arg("align: " + std::to_string(align) + " is not a power of two (allowed: 1, 2, 4, ... pages)");
}
}  // namespace

uint64_t cma_alloc_positions(const Cma& cma, uint64_t count, uint64_t align) {
  check_alloc_args(cma, count, align);
  const unsigned align_order = unsigned(std::countr_zero(align));
  const uint64_t mask = cma_bitmap_aligned_mask(cma, align_order);
  const uint64_t offset = cma_bitmap_aligned_offset(cma, align_order);
  const uint64_t bits = cma_bitmap_pages_to_bits(cma, count), maxno = cma.bitmap_maxno();
  // bitmap_find_next_zero_area_off from 0 on a clear bitmap: __ALIGN_MASK(0 + offset, mask) - offset.
  const uint64_t first = ((offset + mask) & ~mask) - offset;
  if (first + bits > maxno) return 0;
  return (maxno - bits - first) / (mask + 1) + 1;
}

Page* cma_alloc(Cma& cma, MigrateContext& mc, int cpu, uint64_t count, uint64_t align, CmaAllocStats* stats,
                const std::function<bool()>& fatal_signal_pending) {
  check_alloc_args(cma, count, align);
  CmaAllocStats local;
  CmaAllocStats& st = stats ? *stats : local;
  ++st.calls;
  const unsigned align_order = unsigned(std::countr_zero(align));
  const uint64_t mask = cma_bitmap_aligned_mask(cma, align_order);
  const uint64_t offset = cma_bitmap_aligned_offset(cma, align_order);
  const uint64_t bitmap_maxno = cma.bitmap_maxno();
  const uint64_t bitmap_count = cma_bitmap_pages_to_bits(cma, count);
  uint64_t start = 0;
  Page* page = nullptr;
  int ret = -ENOMEM;
  for (;;) {
    uint64_t bitmap_no;
    {
      LockToken t;
      cma.lock.lock(t);
      // If the request is larger than the available number of pages, stop right away.
      if (count > cma.available_count_) {
        cma.lock.unlock(t);
        break;
      }
      bitmap_no = bitmap_find_next_zero_area_off(cma.bitmap_, bitmap_maxno, start, bitmap_count, mask, offset);
      if (bitmap_no >= bitmap_maxno) {
        cma.lock.unlock(t);
        break;
      }
      bitmap_set(cma.bitmap_, bitmap_no, bitmap_count);
      cma.available_count_ -= count;
      // It's safe to drop the lock here. We've marked this region for our exclusive use. If the migration fails
      // we will take the lock again and unmark it.
      cma.lock.unlock(t);
    }
    const uint64_t pfn = cma.base_pfn + (bitmap_no << cma.order_per_bit);
    Lock& m = cma.alloc_lock();
    LockToken mt;
    const uint64_t c0 = clock_ticks();
    m.lock(mt);  // mutex_lock(&cma_mutex) before the patch, mutex_lock(&cma->alloc_mutex) after
    const uint64_t c1 = clock_ticks();
    ++st.attempts;
    ret = alloc_contig_range(mc, cpu, pfn, pfn + count, MIGRATE_CMA, GFP_KERNEL, &st.contig, fatal_signal_pending);
    m.unlock(mt);
    st.mutex_wait_ticks += c1 - c0;
    st.mutex_hold_ticks += clock_ticks() - c1;
    if (ret == 0) {
      page = mc.ms.pfn_to_page(pfn);
      break;
    }
    cma_clear_bitmap(cma, pfn, count);
    if (ret != -EBUSY) break;
    ++st.busy_retries;
    // Try again with a bit different memory target.
    start = bitmap_no + mask + 1;
  }
  if (!page) {
    ++st.failures;
    st.last_error = ret;
  }
  return page;
}

bool cma_release(Cma& cma, MemorySystem& ms, int cpu, const Page* pages, uint64_t count) {
  if (!pages || count == 0) return false;
  const uint64_t pfn = ms.page_to_pfn(pages);
  // cma_pages_valid
  if (page_to_nid(*pages) != cma.nid || !cma.contains(pfn) || pfn + count > cma.base_pfn + cma.count) return false;
  free_contig_range(ms, cpu, pfn, count);
  cma_clear_bitmap(cma, pfn, count);
  return true;
}

}  // namespace alloclab::mm
