function X = dtt1D(x, dtt_type, dim)
% Stand-in for the dtt1D MEX (FFTW r2r): types 1 and 5 by their definition, along dim (default 1).
  if nargin < 3, dim = 1; end
  if dim == 2, X = dtt1D(x.', dtt_type, 1).'; return; end
  X = dttmat(size(x, 1), dtt_type) * x;
end
