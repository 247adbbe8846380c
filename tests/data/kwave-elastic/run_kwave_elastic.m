% k-Wave's pstdElastic2D / pstdElastic3D on the cases of tests/physics/test_elastic_kwave.py
% (GNU Octave, double precision, 'PlotSim' false).
%   python tests/physics/test_elastic_kwave.py --inputs DIR      (writes DIR/in_<case>.mat)
%   cd DIR && octave-cli run_kwave_elastic.m                     (k-Wave's folder on the path:
%       addpath first)
%   python tests/physics/test_elastic_kwave.py --reference DIR   (writes reference.npz here)
% Octave lacks datetime and seconds, which k-Wave's solvers use only to print timings: the
% command-line functions below stand in for them.
1;
function t = datetime(varargin)
  t = now;
end
function s = seconds(d)
  s = d * 86400;
end

files = dir('in_*.mat');
for i = 1:numel(files)
  d = load(files(i).name); name = files(i).name(4:end-4);
  s = double(d.shape); dx = 1e-4;
  if numel(s) == 2
    kgrid = kWaveGrid(s(1), dx, s(2), dx);
  else
    kgrid = kWaveGrid(s(1), dx, s(2), dx, s(3), dx);
  end
  kgrid.setTime(double(d.Nt), d.dt);
  medium = struct('sound_speed_compression', d.cp, 'sound_speed_shear', d.cs, ...
                  'density', d.rho);
  if isfield(d, 'ap')
    medium.alpha_coeff_compression = d.ap; medium.alpha_coeff_shear = d.as_;
  end
  source = struct();
  if isfield(d, 'p0'), source.p0 = d.p0; end
  for f = {'ux', 'uy', 'sxx', 'syy', 'sxy'}
    if isfield(d, f{1}), source.(f{1}) = d.(f{1}); end
  end
  if isfield(d, 'u_mask'), source.u_mask = logical(d.u_mask); source.u_mode = d.u_mode; end
  if isfield(d, 's_mask'), source.s_mask = logical(d.s_mask); source.s_mode = d.s_mode; end
  sensor = struct('mask', logical(d.mask));
  sensor.record = strsplit(strtrim(d.record), ',');
  args = {'PlotSim', false, 'PMLSize', double(d.pml), 'PMLAlpha', d.alpha};
  if numel(s) == 2
    out = pstdElastic2D(kgrid, medium, source, sensor, args{:});
  else
    out = pstdElastic3D(kgrid, medium, source, sensor, args{:});
  end
  save('-v7', ['out_' name '.mat'], '-struct', 'out');
end
