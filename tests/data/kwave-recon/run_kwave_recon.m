% k-Wave's reconstructions on the cases of tests/physics/test_reconstruction_kwave.py (GNU
% Octave): forward runs, kspaceLineRecon, kspacePlaneRecon and time reversal with
% sensor.time_reversal_boundary_data, all in double precision.
%   cd DIR && octave-cli run_kwave_recon.m       (k-Wave's folder on the path: addpath first)
%   python tests/physics/test_reconstruction_kwave.py --reference DIR/recon.mat
% Octave lacks datetime and seconds, which k-Wave's solvers use only to print timings, and its
% ver('matlab') is empty, which kspaceLineRecon/kspacePlaneRecon read to refuse MATLAB R2012b:
% the command-line functions below stand in for them.
1;
function v = ver(varargin)
  v = struct('Name', 'Octave', 'Version', version(), 'Release', '(Octave)', 'Date', '');
end
function t = datetime(varargin)
  t = now;
end
function s = seconds(d)
  s = d * 86400;
end

c = 1500; dx = 1e-4; out = struct();

% line sensor along x = 0 (the first row), two discs, PML outside the grid
kgrid = kWaveGrid(32, dx, 48, dx);
medium = struct('sound_speed', c);
p0 = smooth(5 * makeDisc(32, 48, 20, 28, 5) + 5 * makeDisc(32, 48, 12, 14, 3), true);
sensor = struct('mask', zeros(32, 48)); sensor.mask(1, :) = 1;
kgrid.makeTime(c);
args = {'PMLInside', false, 'PMLSize', 10, 'Smooth', false, 'PlotSim', false};
data = kspaceFirstOrder2D(kgrid, medium, struct('p0', p0), sensor, args{:});
out.line_p0 = p0; out.line_dt = kgrid.dt; out.line_data = data;
out.line_nearest = kspaceLineRecon(data.', dx, kgrid.dt, c, 'Interp', '*nearest');
out.line_linear = kspaceLineRecon(data', dx, kgrid.dt, c, 'Interp', '*linear', 'PosCond', true);

% plane sensor x = 0, a ball, PML outside
kgrid = kWaveGrid(16, dx, 14, dx, 12, dx);
p0 = smooth(3 * makeBall(16, 14, 12, 9, 8, 6, 3), true);
sensor = struct('mask', zeros(16, 14, 12)); sensor.mask(1, :, :) = 1;
kgrid.makeTime(c);
args = {'PMLInside', false, 'PMLSize', 8, 'Smooth', false, 'PlotSim', false};
data = kspaceFirstOrder3D(kgrid, medium, struct('p0', p0), sensor, args{:});
data = reshape(data, 14, 12, kgrid.Nt);
out.plane_p0 = p0; out.plane_dt = kgrid.dt; out.plane_data = data;
out.plane_nearest = kspacePlaneRecon(data, dx, dx, kgrid.dt, c, 'DataOrder', 'yzt');
out.plane_linear = kspacePlaneRecon(permute(data, [3, 1, 2]), dx, dx, kgrid.dt, c, ...
    'Interp', '*linear');

% time reversal on a binary ring, PML outside
kgrid = kWaveGrid(40, dx, 40, dx);
p0 = smooth(2 * makeDisc(40, 40, 24, 18, 5), true);
sensor = struct('mask', makeCircle(40, 40, 21, 21, 16));
kgrid.makeTime(c);
args = {'PMLInside', false, 'PMLSize', 10, 'Smooth', false, 'PlotSim', false};
data = kspaceFirstOrder2D(kgrid, medium, struct('p0', p0), sensor, args{:});
sensor.time_reversal_boundary_data = data;
out.ring_p0 = p0; out.ring_mask = sensor.mask; out.ring_dt = kgrid.dt; out.ring_data = data;
out.ring_tr = kspaceFirstOrder2D(kgrid, medium, struct('p0', 0), sensor, args{:});

% time reversal on Cartesian points of a 270-degree arc, PML inside the grid
kgrid = kWaveGrid(48, dx, 48, dx);
p0 = smooth(2 * makeDisc(48, 48, 22, 27, 4), true);
sensor = struct('mask', makeCartCircle(1.5e-3, 40, [0, 0], 3 * pi / 2));
kgrid.makeTime(c);
args = {'PMLSize', 8, 'Smooth', false, 'PlotSim', false};
data = kspaceFirstOrder2D(kgrid, medium, struct('p0', p0), sensor, args{:});
sensor.time_reversal_boundary_data = data;
out.arc_p0 = p0; out.arc_points = sensor.mask; out.arc_dt = kgrid.dt; out.arc_data = data;
out.arc_tr = kspaceFirstOrder2D(kgrid, medium, struct('p0', 0), sensor, args{:});

save('-v7', 'recon.mat', '-struct', 'out');
