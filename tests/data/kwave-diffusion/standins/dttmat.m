function C = dttmat(n, dtt_type)
% FFTW's unnormalised REDFT00 (type 1) or RODFT00 (type 5) as an n x n matrix (its definition).
  k = (0:n-1).'; j = 0:n-1;
  switch dtt_type
    case 1
      C = 2 * cos(pi * k * j / (n - 1));
      C(:, 1) = 1; C(:, n) = (-1) .^ k;
    case 5
      C = 2 * sin(pi * (k + 1) * (j + 1) / (n + 1));
    otherwise
      error('dttmat: only types 1 and 5');
  end
end
