// The page cache (radix tree, address_space) and the pagevec LRU addition (see page_cache.hpp).
#include "alloclab/mm/page_cache.hpp"

#include <cerrno>
#include <stdexcept>
#include <string>

namespace alloclab::mm {

namespace {

// radix_tree_maxindex(height).
uint64_t maxindex(unsigned height) {
  if (height * RADIX_TREE_MAP_SHIFT >= 64) return UINT64_MAX;
  return (uint64_t(1) << (height * RADIX_TREE_MAP_SHIFT)) - 1;
}

unsigned height_for(uint64_t index) {
  unsigned h = 1;
  while (index > maxindex(h)) ++h;
  return h;
}

// kmem_cache_alloc(radix_tree_node_cachep): a fresh node from the host's heap.
RadixTreeNode* radix_tree_node_cachep_alloc() {
  auto* n = new RadixTreeNode;
  vcost::forget(n, sizeof(RadixTreeNode));
  return n;
}

lru_list page_lru(const Page& p) {  // page_lru_base_type(): page_is_file_cache() is !PageSwapBacked
  return PageSwapBacked(p) ? LRU_INACTIVE_ANON : LRU_INACTIVE_FILE;
}

}  // namespace

// ---- radix tree ----------------------------------------------------------------------------------------------------

void RadixTreePreload::preload() {
  while (nr_ < RADIX_TREE_PRELOAD_SIZE) {
    nodes_[nr_++].reset(radix_tree_node_cachep_alloc());
    ++allocated_;
  }
}

RadixTreeNode* RadixTreePreload::pop() { return nr_ == 0 ? nullptr : nodes_[--nr_].release(); }

RadixTree::~RadixTree() {
  if (RadixTreeNode* r = rnode_.load(std::memory_order_relaxed)) free_node(r);
}

void RadixTree::free_node(RadixTreeNode* n) {
  if (n->height > 1)
    for (auto& s : n->slots)
      if (void* c = s.load(std::memory_order_relaxed)) free_node(static_cast<RadixTreeNode*>(c));
  delete n;
}

RadixTreeNode* RadixTree::node_alloc(RadixTreePreload* preload) {
  // radix_tree_node_alloc: the page-cache root is GFP_ATOMIC, so the per-CPU reserve is used first.
  RadixTreeNode* n = preload ? preload->pop() : nullptr;
  if (!n) {
    n = radix_tree_node_cachep_alloc();
    ++locked_allocs_;
  }
  ++nodes_;
  return n;
}

unsigned RadixTree::height() const {
  const RadixTreeNode* r = rnode_.load(std::memory_order_acquire);
  return r ? r->height : 0;
}

void* RadixTree::lookup(uint64_t index) const {
  const RadixTreeNode* node = rnode_.load(std::memory_order_acquire);
  if (!node || index > maxindex(node->height)) return nullptr;
  for (;;) {
    const unsigned shift = (node->height - 1) * RADIX_TREE_MAP_SHIFT;
    const auto& slot = node->slots[(index >> shift) & (RADIX_TREE_MAP_SIZE - 1)];
    vcost::visit(&slot);
    void* s = slot.load(std::memory_order_acquire);
    if (!s || node->height == 1) return s;
    node = static_cast<const RadixTreeNode*>(s);
  }
}

int RadixTree::insert(uint64_t index, void* item, RadixTreePreload* preload) {
  RadixTreeNode* root = rnode_.load(std::memory_order_relaxed);
  bool fresh_root = false;
  if (!root) {
    root = node_alloc(preload);
    root->height = height_for(index);
    fresh_root = true;
  }
  while (index > maxindex(root->height)) {  // radix_tree_extend: a new top node whose slot 0 is the old tree
    RadixTreeNode* n = node_alloc(preload);
    n->height = root->height + 1;
    n->count = 1;
    n->slots[0].store(root, std::memory_order_relaxed);
    rnode_.store(n, std::memory_order_release);
    root = n;
  }
  RadixTreeNode* node = root;
  while (node->height > 1) {
    const unsigned shift = (node->height - 1) * RADIX_TREE_MAP_SHIFT;
    auto& slot = node->slots[(index >> shift) & (RADIX_TREE_MAP_SIZE - 1)];
    vcost::visit(&slot);
    auto* child = static_cast<RadixTreeNode*>(slot.load(std::memory_order_relaxed));
    if (!child) {
      child = node_alloc(preload);
      child->height = node->height - 1;
      vcost::touch(&slot, true);
      slot.store(child, std::memory_order_release);
      vcost::touch(&node->count, true);
      node->count++;
    }
    node = child;
  }
  auto& slot = node->slots[index & (RADIX_TREE_MAP_SIZE - 1)];
  vcost::visit(&slot);
  if (slot.load(std::memory_order_relaxed)) return -EEXIST;
  vcost::touch(&slot, true);
  slot.store(item, std::memory_order_release);
  vcost::touch(&node->count, true);  // the node's first line (height, count)
  node->count++;
  if (fresh_root) rnode_.store(root, std::memory_order_release);
  return 0;
}

void* RadixTree::remove(uint64_t index) {
  RadixTreeNode* node = rnode_.load(std::memory_order_relaxed);
  if (!node || index > maxindex(node->height)) return nullptr;
  for (;;) {
    const unsigned shift = (node->height - 1) * RADIX_TREE_MAP_SHIFT;
    auto& slot = node->slots[(index >> shift) & (RADIX_TREE_MAP_SIZE - 1)];
    vcost::visit(&slot);
    void* s = slot.load(std::memory_order_relaxed);
    if (!s) return nullptr;
    if (node->height == 1) {
      vcost::touch(&slot, true);
      slot.store(nullptr, std::memory_order_release);
      vcost::touch(&node->count, true);
      node->count--;
      return s;
    }
    node = static_cast<RadixTreeNode*>(s);
  }
}

// ---- address_space -------------------------------------------------------------------------------------------------

PageCache::PageCache(LockDomain& locks, std::string_view lock_class) : tree_lock(locks, lock_class) {}

Page* PageCache::find_get_page(uint64_t index) const {
  for (;;) {
    auto* page = static_cast<Page*>(page_tree.lookup(index));
    if (!page) return nullptr;
    if (!get_page_unless_zero(*page)) continue;  // being freed under us: look again
    if (page_tree.lookup(index) == page) return page;
    // Moved or removed between the lookup and the reference (truncate; never during a fault run). The page
    // cache's own reference was dropped by the remover, so ours cannot be the last one that matters here.
    vcost::rmw(page);
    std::atomic_ref<int32_t>(page->_refcount).fetch_sub(1, std::memory_order_acq_rel);
  }
}

int PageCache::add_to_page_cache_locked(Page* page, uint64_t index, RadixTreePreload* preload,
                                        uint64_t* tree_lock_count) {
  get_page(*page);  // page_cache_get: the cache's reference
  memmap_access(page, 1, Stream::update);
  page->mapping = mapping_value();
  page->index = index;
  LockToken t;
  tree_lock.lock(t);  // spin_lock_irq(&mapping->tree_lock)
  if (tree_lock_count) ++*tree_lock_count;
  const int error = page_tree.insert(index, page, preload);
  if (error == 0) {
    vcost::touch(&nrpages_, true);
    nrpages_.store(nrpages_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    page->mapping = 0;
  }
  tree_lock.unlock(t);
  if (error) {  // drop the cache's reference again (never the last one)
    vcost::rmw(page);
    std::atomic_ref<int32_t>(page->_refcount).fetch_sub(1, std::memory_order_acq_rel);
  }
  return error;
}

void PageCache::remove_from_page_cache(Page* page) {
  LockToken t;
  tree_lock.lock(t);
  if (page_tree.remove(page->index) != page) {
    tree_lock.unlock(t);
    throw std::logic_error("remove_from_page_cache: the page at index " + std::to_string(page->index) +
                           " is not the one in the tree");
  }
  page->mapping = 0;
  nrpages_.store(nrpages_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  tree_lock.unlock(t);
}

// ---- LRU -----------------------------------------------------------------------------------------------------------

LruCache::LruCache(MemorySystem& ms, LockDomain& locks) : ms_(ms) {
  for (int n = 0; n < ms.nr_nodes(); ++n) lruvecs_.push_back(std::make_unique<Lruvec>(locks));
}

void LruCache::del_page_from_lru(Page* page) {
  const int nid = page_to_nid_atomic(*page);
  Lruvec& v = lruvec(nid);
  Zone& z = ms_.zone(nid);
  LockToken t;
  v.lru_lock.lock(t);
  if (PageLRUAtomic(*page)) {
    const lru_list l = page_lru(*page);
    list_del(v.lists[l], z.zone_mem_map, z.page_idx(page));
    v.nr[l]--;
    clear_page_flag(*page, PG_lru);
  }
  v.lru_lock.unlock(t);
}

uint64_t LruCache::nr_pages(int lru) const {
  uint64_t n = 0;
  for (const auto& v : lruvecs_) n += v->nr[lru];
  return n;
}

void lru_cache_add(LruCache& lru, Pagevec& pvec, Page* page, int cpu) {
  get_page(*page);  // page_cache_get: the pagevec's reference
  pvec.pages[pvec.nr++] = page;
  if (pvec.nr == pvec.size) pagevec_lru_add(lru, pvec, cpu);
}

void pagevec_lru_add(LruCache& lru, Pagevec& pvec, int cpu) {
  MemorySystem& ms = lru.ms();
  LruCache::Lruvec* locked = nullptr;
  LockToken t;
  for (unsigned i = 0; i < pvec.nr; ++i) {
    Page* page = pvec.pages[i];
    const int nid = page_to_nid_atomic(*page);
    LruCache::Lruvec& v = lru.lruvec(nid);
    if (&v != locked) {  // the pages' zone changed: switch lru_lock
      if (locked) locked->lru_lock.unlock(t);
      v.lru_lock.lock(t);
      ++pvec.lru_lock_taken;
      locked = &v;
    }
    if (PageLRUAtomic(*page)) {
      v.lru_lock.unlock(t);
      throw std::logic_error("pagevec_lru_add: page already on an LRU list");
    }
    set_page_flag(*page, PG_lru);
    Zone& z = ms.zone(nid);
    list_add(v.lists[pvec.lru], z.zone_mem_map, z.page_idx(page));
    vcost::touch(&v.nr[pvec.lru], true);
    v.nr[pvec.lru]++;
  }
  if (locked) locked->lru_lock.unlock(t);
  for (unsigned i = 0; i < pvec.nr; ++i) page_cache_release(ms, cpu, pvec.pages[i]);  // release_pages
  pvec.nr = 0;
}

}  // namespace alloclab::mm
