function X = dtt3D(x, dtt_type)
% Stand-in for the dtt3D MEX: the 1-D transform along each of the three axes.
  s = size(x); X = reshape(dttmat(s(1), dtt_type) * reshape(x, s(1), []), s);
  X = permute(X, [2 1 3]); X = reshape(dttmat(s(2), dtt_type) * reshape(X, s(2), []), [s(2) s(1) s(3)]);
  X = permute(X, [2 1 3]);
  X = permute(X, [3 2 1]); X = reshape(dttmat(s(3), dtt_type) * reshape(X, s(3), []), [s(3) s(2) s(1)]);
  X = permute(X, [3 2 1]);
end
