// PoolStore: where credits come from (explicit grants, credits a submit link
// carries) and what the coordinator measured of a device. No credit is
// minted because an identity appeared: a peer's first balance is 0.
#include "pool/pool_store.hpp"

namespace runsnack::pool {

Result<void> PoolStore::grant_credits(const std::string& peer, Micro amount, std::int64_t now_ms) {
  if (amount <= 0) return fail(errc::invalid_argument, "a grant must be more than 0 credits");
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  if (auto room = room_to_mint(peer, amount); !room) return room;
  auto txn = new_txn("grant", now_ms);
  if (!txn) return txn.error();
  if (auto r = entry(*txn, kMintAccount, -amount, "mint", std::nullopt, ""); !r) return r;
  if (auto r = entry(*txn, peer_account(peer), amount, "mint", std::nullopt, ""); !r) return r;
  return tx->commit();
}

Result<void> PoolStore::room_to_mint(const std::string& peer, Micro amount) {
  auto held = balance(peer_account(peer));
  if (!held) return held.error();
  auto minted = balance(kMintAccount);  // negative: what was minted
  if (!minted) return minted.error();
  if (amount > kMaxBalance - *held)
    return fail(errc::invalid_argument, "that would take the balance of " + peer.substr(0, 12) + "... past " +
                                            format_credits(kMaxBalance) + " credits, the most one account holds");
  if (amount > kMaxMinted + *minted)
    return fail(errc::invalid_argument, "that would take the credits this pool ever minted past " +
                                            format_credits(kMaxMinted));
  return {};
}

Result<void> PoolStore::offer_link_credits(const std::string& grant_id, Micro amount) {
  if (amount <= 0) return fail(errc::invalid_argument, "a link's credits must be more than 0");
  auto st = db_.prepare("INSERT INTO link_credits (grant_id, amount) VALUES (?, ?)");
  if (!st) return st.error();
  return st->bind(1, std::string_view(grant_id)).bind(2, amount).run();
}

Result<Micro> PoolStore::claim_link_credits(const std::string& grant_id, const std::string& peer, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  // Claimed in the same statement that finds it: two sessions on one link cannot both mint.
  auto st = db_.prepare(
      "UPDATE link_credits SET claimed_by = ?2, claimed_at = ?3 WHERE grant_id = ?1 AND claimed_by IS NULL "
      "RETURNING amount");
  if (!st) return st.error();
  st->bind(1, std::string_view(grant_id)).bind(2, std::string_view(peer)).bind(3, now_ms);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return Micro{0};
  const Micro amount = st->column_int64(0);
  if (auto more = st->step(); !more) return more.error();
  if (auto room = room_to_mint(peer, amount); !room) return room.error();
  auto txn = new_txn("link-credits", now_ms);
  if (!txn) return txn.error();
  if (auto r = entry(*txn, kMintAccount, -amount, "mint", std::nullopt, ""); !r) return r.error();
  if (auto r = entry(*txn, peer_account(peer), amount, "mint", std::nullopt, ""); !r) return r.error();
  if (auto r = tx->commit(); !r) return r.error();
  return amount;
}

Result<void> PoolStore::set_device_score(const std::string& device, double score) {
  auto st = db_.prepare("UPDATE devices SET score = ? WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, static_cast<std::int64_t>(score)).bind(2, std::string_view(device)).run();
}

Result<OnlinePrices> PoolStore::online_prices() {
  auto st = db_.prepare(
      "SELECT COALESCE(SUM(CASE WHEN price = 0 THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN price > 0 THEN 1 ELSE 0 END), 0), "
      "COALESCE(MIN(CASE WHEN price > 0 THEN price END), 0) FROM devices WHERE online = 1 AND excluded IS NULL");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  OnlinePrices p;
  if (*row) p.free = st->column_int64(0), p.priced = st->column_int64(1), p.cheapest = static_cast<double>(st->column_int64(2)) / 1000.0;
  return p;
}

}  // namespace runsnack::pool
