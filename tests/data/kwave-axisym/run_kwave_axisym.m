% k-Wave's kspaceFirstOrderAS on the cases of tests/physics/test_axisymmetric_kwave_matlab.py
% (GNU Octave, 'DataCast' 'double', 'PlotSim' false), every radial symmetry k-Wave's MATLAB
% code has.  Run in an empty folder with k-Wave's folder on the path:
%   octave-cli --eval "addpath('<k-Wave>'); run('run_kwave_axisym.m')"
%   python tests/physics/test_axisymmetric_kwave_matlab.py --reference DIR  (writes the .npz)
% Octave lacks datetime and seconds, which k-Wave's solvers use only to print timings: the
% command-line functions below stand in for them, and for dtt1D, k-Wave's compiled trigonometric
% transforms (used by the 'WSWA' and 'WSWS' symmetries).
1;
function t = datetime(varargin)
  t = now;
end
function s = seconds(d)
  s = d * 86400;
end
function y = dtt1D(x, type, dim)
  % FFTW's unnormalised real-to-real transforms (REDFT00..11, RODFT00..11) along dim, the
  % conventions of k-Wave's compiled dtt1D (not part of its source tree), by matrix product.
  if dim == 1, y = dtt1D(x.', type, 2).'; return; end
  n = size(x, 2); j = (0:n-1)'; k = 0:n-1;
  switch type
    case 1, T = 2 * cos(pi * j * k / (n - 1)); T([1 n], :) = T([1 n], :) / 2;
    case 2, T = 2 * cos(pi * (j + 0.5) * k / n);
    case 3, T = 2 * cos(pi * j * (k + 0.5) / n); T(1, :) = 1;
    case 4, T = 2 * cos(pi * (j + 0.5) * (k + 0.5) / n);
    case 5, T = 2 * sin(pi * (j + 1) * (k + 1) / (n + 1));
    case 6, T = 2 * sin(pi * (j + 0.5) * (k + 1) / n);
    case 7, T = 2 * sin(pi * (j + 1) * (k + 0.5) / n); T(n, :) = (-1).^k;
    case 8, T = 2 * sin(pi * (j + 0.5) * (k + 0.5) / n);
  end
  y = x * T;
end

Nx = 64; Ny = 32; dx = 1e-4;
[X, Y] = ndgrid(0:Nx-1, 0:Ny-1);
kgrid = kWaveGrid(Nx, dx, Ny, dx);
dt = 0.1 * dx / 1800; Nt = 200;
kgrid.setTime(Nt, dt);
mask = false(Nx, Ny); mask(44, 1:3:Ny-10) = true; mask(12:4:52, 1) = true;
record = {'p', 'p_final'};
syms = {'WSWA-FFT', 'WSWS-FFT', 'WSWA', 'WSWS'};
% A: homogeneous, lossless, p0 a Gaussian on the axis
% B: heterogeneous sound speed and density (a layer whose face is not aligned with the grid),
%    Stokes absorption, B/A, p0 off the axis
c = 1500 * ones(Nx, Ny); rho = 1000 * ones(Nx, Ny);
layer = X >= 38 + floor(Y / 6); c(layer) = 1800; rho(layer) = 1200;
cases = struct();
cases.A.medium = struct('sound_speed', 1500, 'density', 1000);
cases.A.p0 = 1e3 * exp(-((X - 28).^2 + Y.^2) / 2.5^2);
cases.B.medium = struct('sound_speed', c, 'density', rho, 'alpha_coeff', 0.75 + 0 * c, ...
                        'alpha_power', 2, 'BonA', 6 + 0 * c);
cases.B.p0 = 2e5 * exp(-((X - 26).^2 + (Y - 7).^2) / 2^2);
save('-v7', 'inputs.mat', 'Nx', 'Ny', 'dx', 'dt', 'Nt', 'mask', 'c', 'rho');
names = fieldnames(cases);
for i = 1:numel(names)
  cs = cases.(names{i});
  source = struct('p0', cs.p0);
  sensor = struct('mask', mask); sensor.record = record;
  for j = 1:numel(syms)
    out = kspaceFirstOrderAS(kgrid, cs.medium, source, sensor, 'PlotSim', false, ...
        'DataCast', 'double', 'PMLSize', 10, 'RadialSymmetry', syms{j});
    tag = strrep(syms{j}, '-', '_');
    save('-v7', ['out_' names{i} '_' tag '.mat'], '-struct', 'out');
    fprintf('%s %s max|p| %g\n', names{i}, syms{j}, max(abs(out.p(:))));
  end
end
