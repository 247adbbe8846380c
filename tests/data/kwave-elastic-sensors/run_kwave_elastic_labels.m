% k-Wave's pstdElastic2D with labelled source masks (source.u_mask, source.s_mask with labels
% 1..L, one signal row per label) and cuboid-corner sensors (sensor.mask as 1-based
% [x1 y1 x2 y2]' columns), additive and Dirichlet, on the case of
% tests/physics/test_elastic_labels.py::test_against_kwave (GNU Octave, double precision).
%   python tests/physics/test_elastic_labels.py --inputs DIR     (writes DIR/in_labels.mat)
%   cd DIR && octave-cli run_kwave_elastic_labels.m              (k-Wave's folder on the path)
%   python tests/physics/test_elastic_labels.py --reference DIR  (writes labels.npz here)
% Octave lacks datetime and seconds, which k-Wave's solvers use only to print timings.
1;
function t = datetime(varargin)
  t = now;
end
function s = seconds(d)
  s = d * 86400;
end

d = load('in_labels.mat');
s = double(d.shape);
kgrid = kWaveGrid(s(1), d.dx, s(2), d.dx);
kgrid.setTime(double(d.Nt), d.dt);
medium = struct('sound_speed_compression', d.cp, 'sound_speed_shear', d.cs, 'density', d.rho);
sensor = struct('mask', double(d.corners));
sensor.record = {'p', 'p_max', 'u', 'u_rms', 'I_avg', 'p_final'};
for mode = {'additive', 'dirichlet'}
  source = struct('u_mask', d.u_mask, 'ux', d.ux, 'uy', d.uy, 'u_mode', mode{1}, ...
                  's_mask', d.s_mask, 'sxx', d.sxx, 'syy', d.syy, 'sxy', d.sxy, ...
                  's_mode', mode{1});
  data = pstdElastic2D(kgrid, medium, source, sensor, 'PlotSim', false, ...
                       'PMLSize', double(d.pml), 'PMLAlpha', 2);
  save('-v7', ['out_' mode{1} '.mat'], 'data');
end
