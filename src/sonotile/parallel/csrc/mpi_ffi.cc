// sonotile's MPI custom calls (sonotile/parallel/mpi_ffi.py builds this file with the MPI C++
// compiler and registers them). Both join mpi4jax's ordered effect: a token in, a token out.
//
// sonotile_mpi_halos: the overlaps of k blocks with both neighbours along one array axis, as
// one call of MPI point-to-point messages.
//
// Every field is a C-ordered block of the same shape. Along `axis`, each block's first `width`
// planes go to the left neighbour and its planes [end - width, end) (its last real ones) to the
// right one, read straight from the block's buffer (along axis 0 a plane run is one contiguous
// range; along a later axis MPI reads it as a strided vector: no packing copy of ours either
// way), and each neighbour's go straight into the halo outputs (contiguous, shape of the block
// with `width` along `axis`). All 4k messages are in flight at once; the call returns when
// every one is done.
//
//   args: k blocks (any dtype, same shape), then mpi4jax's ordering token
//   rets: 2k halos (field i: left at 2i, right at 2i + 1), then the token
//   attrs: comm (the communicator's handle), left, right (ranks in it), axis, width, end (this
//     block's real planes along axis), tag (first tag of the call: tags tag .. tag + 2k - 1)
//
// sonotile_mpi_transpose: all-to-alls of P equal contiguous pieces, one per field (k fields
// at one meeting), each keeping this rank's own piece where it lies. A field's `full` is the
// result's buffer (aliased to it) holding only piece `me` (the piece this rank keeps; its
// other pieces are not yet written); its `others` holds the P - 1 pieces for the other ranks,
// in rank order. Piece p of the result comes from rank p's `others`, straight into place: no
// copy of the kept piece, no staging buffer (an MPI_Alltoall copies the kept piece from its
// send buffer to its receive buffer). Field i's messages carry tag i.
//
//   args: k pairs (full, others) (full: P pieces, others: P - 1), mpi4jax's ordering token
//   rets: k results (result i aliased to full i), the token
//   attrs: comm (the communicator's handle; ranks 0 .. P - 1 are the pieces' owners), me

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error Fail(const std::string& what, const char* call = "sonotile_mpi_halos") {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::string(call) + ": " + what);
}

ffi::Error MpiFail(const char* call, int code, const char* name = "sonotile_mpi_halos") {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return ffi::Error(ffi::ErrorCode::kInternal,
                    std::string(name) + ": " + call + ": " + std::string(text, len));
}

MPI_Comm CommOf(int64_t handle) {
  MPI_Comm comm;
  static_assert(sizeof(MPI_Comm) <= sizeof(int64_t), "MPI_Comm wider than 64 bits");
  std::memcpy(&comm, &handle, sizeof(MPI_Comm));  // a pointer (Open MPI) or an int (MPICH)
  return comm;
}

ffi::Error HalosImpl(int64_t comm_handle, int64_t left, int64_t right, int64_t axis,
                     int64_t width, int64_t end, int64_t tag, ffi::RemainingArgs args,
                     ffi::RemainingRets rets) {
  // the last argument and result are the ordering token
  if (args.size() < 2 || rets.size() != 2 * (args.size() - 1) + 1)
    return Fail("expected k blocks and a token in, 2k halos and a token out");
  const size_t k = args.size() - 1;
  const MPI_Comm comm = CommOf(comm_handle);

  // check every block and halo before the first message is posted
  std::vector<size_t> outer(k), inner(k);  // per block: planes' count before axis, bytes after
  int64_t n = 0;
  for (size_t i = 0; i < k; ++i) {
    auto x = args.get<ffi::AnyBuffer>(i);
    auto lo = rets.get<ffi::AnyBuffer>(2 * i);
    auto hi = rets.get<ffi::AnyBuffer>(2 * i + 1);
    if (x.has_error() || lo.has_error() || hi.has_error())
      return Fail("a block or halo is not an array");
    auto dims = x->dimensions();
    if (axis < 0 || axis >= int64_t(dims.size()))
      return Fail("axis " + std::to_string(axis) + " of a block of rank " +
                  std::to_string(dims.size()));
    n = dims[axis];
    if (width < 1 || n < width || end < width || end > n)
      return Fail("block of " + std::to_string(n) + " planes along axis " + std::to_string(axis) +
                  ", width " + std::to_string(width) + ", end " + std::to_string(end));
    outer[i] = 1;
    for (int64_t a = 0; a < axis; ++a) outer[i] *= size_t(dims[a]);
    inner[i] = x->size_bytes() / (outer[i] * size_t(n));
    const size_t halo = outer[i] * width * inner[i];
    if ((*lo)->size_bytes() != halo || (*hi)->size_bytes() != halo)
      return Fail("halo outputs are not `width` planes of the block");
    if (inner[i] * width > size_t(INT32_MAX) || outer[i] > size_t(INT32_MAX) ||
        inner[i] * n > size_t(INT32_MAX))
      return Fail("a halo run of over 2 GB");
  }
  // one datatype per block shape: `outer` runs of `width` planes, `n` planes apart
  std::vector<MPI_Datatype> types;
  auto free_types = [&]() {
    for (MPI_Datatype& t : types) MPI_Type_free(&t);
  };
  int rc = MPI_SUCCESS;
  for (size_t i = 0; i < k && rc == MPI_SUCCESS; ++i) {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    rc = MPI_Type_vector(int(outer[i]), int(inner[i] * width), int(inner[i] * n), MPI_BYTE, &t);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t);
    if (rc == MPI_SUCCESS) types.push_back(t);
  }
  if (rc != MPI_SUCCESS) {
    free_types();
    return MpiFail("MPI_Type_vector", rc);
  }
  std::vector<MPI_Request> req(4 * k, MPI_REQUEST_NULL);
  for (size_t i = 0; i < k && rc == MPI_SUCCESS; ++i) {
    char* data = static_cast<char*>(args.get<ffi::AnyBuffer>(i)->untyped_data());
    void* lo = (*rets.get<ffi::AnyBuffer>(2 * i))->untyped_data();
    void* hi = (*rets.get<ffi::AnyBuffer>(2 * i + 1))->untyped_data();
    const int bytes = int(outer[i] * width * inner[i]);
    const int t_lo = int(tag + 2 * i), t_hi = int(tag + 2 * i + 1);
    MPI_Request* r = &req[4 * i];
    // my left halo is the left neighbour's last planes (its message to the right, tag t_lo);
    // my right halo the right neighbour's first planes (its message to the left, tag t_hi)
    rc = MPI_Irecv(lo, bytes, MPI_BYTE, int(left), t_lo, comm, &r[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Irecv(hi, bytes, MPI_BYTE, int(right), t_hi, comm, &r[1]);
    // a run of whole planes (axis 0) as bytes, else the strided vector
    const bool flat = outer[i] == 1;
    const int count = flat ? bytes : 1;
    const MPI_Datatype t = flat ? MPI_BYTE : types[i];
    if (rc == MPI_SUCCESS) rc = MPI_Isend(data, count, t, int(left), t_hi, comm, &r[2]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(data + (end - width) * inner[i], count, t, int(right), t_lo, comm, &r[3]);
  }
  if (rc != MPI_SUCCESS) {
    free_types();
    return MpiFail("MPI_Isend/Irecv", rc);
  }
  rc = MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE);
  free_types();
  if (rc != MPI_SUCCESS) return MpiFail("MPI_Waitall", rc);
  return ffi::Error::Success();
}

ffi::Error TransposeImpl(int64_t comm_handle, int64_t me, ffi::RemainingArgs args,
                         ffi::RemainingRets rets) {
  const char* name = "sonotile_mpi_transpose";
  // args: k (full, others) pairs and the token; rets: k results and the token
  if (rets.size() < 2 || args.size() != 2 * (rets.size() - 1) + 1)
    return Fail("expected k (full, others) pairs and a token in, k results and a token out",
                name);
  const size_t k = rets.size() - 1;
  const MPI_Comm comm = CommOf(comm_handle);
  int P = 0;
  int rc = MPI_Comm_size(comm, &P);
  if (rc != MPI_SUCCESS) return MpiFail("MPI_Comm_size", rc, name);
  if (P < 1 || me < 0 || me >= P)
    return Fail("rank " + std::to_string(me) + " of " + std::to_string(P), name);
  if (k > size_t(INT32_MAX / 2)) return Fail("too many fields", name);
  std::vector<size_t> piece(k);  // check every field before the first message is posted
  for (size_t i = 0; i < k; ++i) {
    auto full = args.get<ffi::AnyBuffer>(2 * i);
    auto others = args.get<ffi::AnyBuffer>(2 * i + 1);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (full.has_error() || others.has_error() || out.has_error())
      return Fail("a field is not an array", name);
    const size_t bytes = full->size_bytes();
    if (bytes % size_t(P) != 0) return Fail("a field not of P equal pieces", name);
    piece[i] = bytes / size_t(P);
    if (others->size_bytes() != piece[i] * size_t(P - 1) || (*out)->size_bytes() != bytes)
      return Fail("the others' pieces or the result are not of the kept buffer's pieces", name);
    if (piece[i] > size_t(INT32_MAX)) return Fail("a piece of over 2 GB", name);
  }
  std::vector<MPI_Request> req(2 * k * size_t(P), MPI_REQUEST_NULL);
  for (size_t i = 0; i < k && rc == MPI_SUCCESS; ++i) {
    auto full = args.get<ffi::AnyBuffer>(2 * i);
    char* dst = static_cast<char*>((*rets.get<ffi::AnyBuffer>(i))->untyped_data());
    const char* kept = static_cast<const char*>(full->untyped_data());
    const char* src = static_cast<const char*>(args.get<ffi::AnyBuffer>(2 * i + 1)->untyped_data());
    const size_t n = piece[i];
    if (dst != kept) std::memcpy(dst + me * n, kept + me * n, n);  // not aliased after all
    MPI_Request* r = &req[2 * i * size_t(P)];
    for (int p = 0; p < P && rc == MPI_SUCCESS; ++p) {
      if (p == me) continue;
      const size_t j = size_t(p - (p > me ? 1 : 0));  // p's piece among the others
      rc = MPI_Irecv(dst + p * n, int(n), MPI_BYTE, p, int(i), comm, &r[2 * p]);
      if (rc == MPI_SUCCESS)
        rc = MPI_Isend(src + j * n, int(n), MPI_BYTE, p, int(i), comm, &r[2 * p + 1]);
    }
  }
  if (rc == MPI_SUCCESS) rc = MPI_Waitall(int(req.size()), req.data(), MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return MpiFail("MPI_Isend/Irecv/Waitall", rc, name);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileMpiTranspose, TransposeImpl,
                              ffi::Ffi::Bind()
                                  .Attr<int64_t>("comm")
                                  .Attr<int64_t>("me")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileMpiHalos, HalosImpl,
                              ffi::Ffi::Bind()
                                  .Attr<int64_t>("comm")
                                  .Attr<int64_t>("left")
                                  .Attr<int64_t>("right")
                                  .Attr<int64_t>("axis")
                                  .Attr<int64_t>("width")
                                  .Attr<int64_t>("end")
                                  .Attr<int64_t>("tag")
                                  .RemainingArgs()
                                  .RemainingRets());
