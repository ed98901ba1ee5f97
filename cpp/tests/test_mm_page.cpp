// struct page: layout, flags with node and zone, page types, the expected-state check, the index-linked lists.
#include <gtest/gtest.h>

#include <vector>

#include "alloclab/mm/page.hpp"

using namespace alloclab::mm;

TEST(MmPage, IsOneCacheLine) {
  EXPECT_EQ(sizeof(Page), 64u);
  EXPECT_EQ(alignof(Page), 64u);
  std::vector<Page> v(2);
  EXPECT_EQ(reinterpret_cast<char*>(&v[1]) - reinterpret_cast<char*>(&v[0]), 64);
}

TEST(MmPage, FlagsCarryNodeAndZoneOutsideTheCheckedBits) {
  Page p{};
  p.flags = page_links(1023, 1);
  EXPECT_EQ(page_to_nid(p), 1023);
  EXPECT_EQ(page_zonenum(p), 1);
  EXPECT_EQ(p.flags & PAGE_FLAGS_CHECK_AT_PREP, 0u);
  p._mapcount = -1;
  EXPECT_TRUE(page_expected_state(p, PAGE_FLAGS_CHECK_AT_PREP | __PG_HWPOISON));
}

TEST(MmPage, BuddyIsAPageTypeInMapcount) {
  Page p{};
  p._mapcount = -1;
  EXPECT_FALSE(PageBuddy(p));
  set_buddy_order(p, 7);
  EXPECT_TRUE(PageBuddy(p));
  EXPECT_EQ(buddy_order(p), 7u);
  EXPECT_NE(p._mapcount, -1);  // a typed page does not pass the free-page check
  EXPECT_FALSE(page_expected_state(p, 0));
  __ClearPageBuddy(p);
  EXPECT_FALSE(PageBuddy(p));
  EXPECT_EQ(p._mapcount, -1);
}

TEST(MmPage, ExpectedStateReadsEveryCheckedField) {
  auto fresh = [] {
    Page p{};
    p._mapcount = -1;
    return p;
  };
  const uint64_t prep = PAGE_FLAGS_CHECK_AT_PREP | __PG_HWPOISON;
  Page p = fresh();
  EXPECT_TRUE(page_expected_state(p, prep));
  p = fresh(), p._mapcount = 0;
  EXPECT_FALSE(page_expected_state(p, prep));
  p = fresh(), p.mapping = 0x1000;
  EXPECT_FALSE(page_expected_state(p, prep));
  p = fresh(), p._refcount = 1;
  EXPECT_FALSE(page_expected_state(p, prep));
  p = fresh(), p.memcg_data = 8;
  EXPECT_FALSE(page_expected_state(p, prep));
  p = fresh(), __set_bit(p, PG_lru);
  EXPECT_FALSE(page_expected_state(p, prep));
  p = fresh(), __set_bit(p, PG_hwpoison);
  EXPECT_FALSE(page_expected_state(p, prep));
  p = fresh(), p.index = 12345, p.private_ = 3;  // not checked
  EXPECT_TRUE(page_expected_state(p, prep));
}

TEST(MmPage, ReferenceCounts) {
  Page p{};
  set_page_refcounted(p);
  get_page(p);
  EXPECT_EQ(page_ref_count(p), 2);
  EXPECT_FALSE(put_page_testzero(p));
  EXPECT_TRUE(put_page_testzero(p));
  EXPECT_EQ(page_ref_count(p), 0);
}

TEST(MmPage, ListsLinkByIndexAndPoisonRemovedPages) {
  std::vector<Page> mem(8);
  PageList l;
  EXPECT_TRUE(l.empty());
  list_add(l, mem.data(), 3);       // 3
  list_add_tail(l, mem.data(), 5);  // 3 5
  list_add(l, mem.data(), 1);       // 1 3 5
  list_add_tail(l, mem.data(), 7);  // 1 3 5 7
  std::vector<uint32_t> order;
  for (uint32_t i = l.head(); i != kNoPage; i = mem[i].lru.next) order.push_back(i);
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 5, 7}));
  EXPECT_EQ(l.last, 7u);
  list_del(l, mem.data(), 3);  // middle
  list_del(l, mem.data(), 1);  // first
  list_del(l, mem.data(), 7);  // last
  EXPECT_EQ(l.head(), 5u);
  EXPECT_EQ(l.last, 5u);
  EXPECT_EQ(mem[5].lru.prev, kNoPage);
  EXPECT_EQ(mem[5].lru.next, kNoPage);
  // A page taken off a list never looks like a tail page (compound_head bit 0 overlays the links).
  EXPECT_FALSE(PageTail(mem[3]));
  EXPECT_FALSE(PageTail(mem[1]));
  list_del(l, mem.data(), 5);
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.last, kNoPage);
}
